package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/cascade-kafka/cascade/faults/proxy"
)

// Fault is one kind of fault the schedule can apply. Apply starts it;
// Heal, run before the next fault, ends it.
type Fault struct {
	Name  string
	Apply func(ctx context.Context) error
	Heal  func(ctx context.Context) error
}

// Target is a broker under test that may support crashes.
type Target interface {
	// Addr is the broker's address, which the proxy forwards to.
	Addr() string
	// Crash kills the broker abruptly (SIGKILL) and starts it again on the
	// same data and address; ErrUnsupported when the target cannot.
	Crash(ctx context.Context) error
}

// ErrUnsupported is returned by a Target that cannot crash.
var ErrUnsupported = errors.New("not supported by this target")

// ProxyFaults returns the faults applied through the proxy p: latency, cut
// connections, lost Produce answers, delayed Produce answers, a stall
// (blackhole) and refused connections, each healed by removing its toxics.
func ProxyFaults(p *proxy.Proxy) []Fault {
	toxic := func(name, typ, stream string, attrs string) proxy.ToxicSpec {
		return proxy.ToxicSpec{Name: name, Type: typ, Stream: stream, Attributes: json.RawMessage(attrs)}
	}
	with := func(name string, specs ...proxy.ToxicSpec) Fault {
		return Fault{
			Name: name,
			Apply: func(context.Context) error {
				var errs []error
				for _, s := range specs {
					errs = append(errs, p.AddToxic(s))
				}
				return errors.Join(errs...)
			},
			Heal: func(context.Context) error {
				var errs []error
				for _, s := range specs {
					if err := p.RemoveToxic(s.Name); err != nil && !errors.Is(err, proxy.ErrNotFound) {
						errs = append(errs, err)
					}
				}
				return errors.Join(errs...)
			},
		}
	}
	return []Fault{
		with("latency", toxic("latency", "latency", proxy.Downstream, `{"latency":40,"jitter":30}`)),
		with("cut-connections", toxic("cut", "reset_peer", proxy.Upstream, `{"timeout":200}`)),
		with("lost-produce-answers", toxic("lost", "kafka_drop_response", proxy.Upstream, `{"api_key":0,"trigger":"probability","p":0.3}`)),
		with("slow-produce-answers", toxic("slow", "kafka_delay_response", proxy.Upstream, `{"api_key":0,"delay":700,"trigger":"probability","p":0.5}`)),
		with("stall", toxic("stall", "timeout", proxy.Upstream, `{"timeout":0}`)),
		with("refuse-connections", toxic("refuse", "kafka_refuse_connection", proxy.Upstream, `{}`),
			toxic("cut-refused", "reset_peer", proxy.Upstream, `{"timeout":0}`)),
	}
}

// CrashFault kills and restarts the target.
func CrashFault(t Target) Fault {
	return Fault{
		Name:  "kill-9",
		Apply: t.Crash,
		Heal:  func(context.Context) error { return nil },
	}
}

// Schedule rotates faults: every period it heals the current fault and
// applies one chosen by the seeded source, or none.
type Schedule struct {
	Faults []Fault
	Seed   uint64
	// Period is how long each fault (or quiet spell) lasts.
	Period time.Duration
	// Log receives one line per change.
	Log io.Writer
}

// Run rotates faults until ctx is done, then heals. It returns the names
// applied, in order ("none" for quiet spells).
func (s *Schedule) Run(ctx context.Context) ([]string, error) {
	rng := rand.New(rand.NewPCG(s.Seed, 0xfa17))
	var applied []string
	var cur *Fault
	heal := func() error {
		if cur == nil {
			return nil
		}
		f := cur
		cur = nil
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := f.Heal(hctx); err != nil {
			return fmt.Errorf("healing %s: %w", f.Name, err)
		}
		return nil
	}
	t := time.NewTicker(s.Period)
	defer t.Stop()
	for {
		if err := heal(); err != nil {
			return applied, err
		}
		k := rng.IntN(len(s.Faults) + 1)
		name := "none"
		if k < len(s.Faults) {
			f := s.Faults[k]
			name = f.Name
			if err := f.Apply(ctx); err != nil {
				if ctx.Err() != nil {
					return applied, nil
				}
				return applied, fmt.Errorf("applying %s: %w", f.Name, err)
			}
			cur = &f
		}
		applied = append(applied, name)
		if s.Log != nil {
			fmt.Fprintf(s.Log, "fault: %s\n", name)
		}
		select {
		case <-ctx.Done():
			return applied, heal()
		case <-t.C:
		}
	}
}
