package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/cascade-kafka/cascade/faults/proxy"
)

// Fault is one kind of fault the schedule can apply. Apply starts it;
// Heal, run before the next fault, ends it.
type Fault struct {
	Name  string
	Apply func(ctx context.Context) error
	Heal  func(ctx context.Context) error
	// Weight is how often the schedule draws it relative to others;
	// zero counts as one.
	Weight int
	// HealedOnApply marks a fault that is over when Apply returns (a
	// crash whose Apply restarts the broker): the schedule logs it healed
	// then, so recovery is measured from that moment, and does not call
	// Heal.
	HealedOnApply bool
	// Recovered, when set, waits after the heal (logged first, so that
	// recovery figures count from it) for what must come back, and fails
	// the schedule when it does not within its own bound.
	Recovered func(ctx context.Context) error
	// Note, when set, describes the fault just applied (a seeded pause's
	// length) in the schedule's log.
	Note func() string
}

func (f Fault) weight() int { return max(f.Weight, 1) }

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
// (blackhole), Produce answered with a retriable error, corrupted Fetch
// batches, lost and delayed transaction answers (EndTxn,
// AddPartitionsToTxn) and refused connections, each healed by removing its
// toxics.
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
		// Transactions: an EndTxn or AddPartitionsToTxn applied whose
		// answer is lost, so the client retries it on a new connection
		// and the retry lands after the original completed; and EndTxn
		// answers held back past other requests.
		with("lost-txn-answers", toxic("lost-endtxn", "kafka_drop_response", proxy.Upstream, `{"api_key":26,"trigger":"probability","p":0.5}`),
			toxic("lost-addparts", "kafka_drop_response", proxy.Upstream, `{"api_key":24,"trigger":"probability","p":0.3}`)),
		with("slow-txn-answers", toxic("slow-endtxn", "kafka_delay_response", proxy.Upstream, `{"api_key":26,"delay":1000,"trigger":"probability","p":0.5}`)),
		// NOT_LEADER_OR_FOLLOWER (6) without forwarding: every client
		// must retry, and nothing was written.
		with("produce-errors", toxic("produce-err", "kafka_error", proxy.Upstream, `{"api_key":0,"error_code":6,"trigger":"probability","p":0.3}`)),
		// A flipped byte in a fetched batch: the consumers must notice
		// the CRC mismatch rather than record a value never written.
		with("corrupt-fetches", toxic("corrupt", "kafka_fetch_corrupt", proxy.Upstream, `{"mode":"corrupt","trigger":"probability","p":0.2}`)),
		with("refuse-connections", toxic("refuse", "kafka_refuse_connection", proxy.Upstream, `{}`),
			toxic("cut-refused", "reset_peer", proxy.Upstream, `{"timeout":0}`)),
	}
}

// CrashFault kills and restarts the target. It weighs three times as much
// as a proxy fault: crashes are what the suite exists for. The restart is not cut short
// when the run ends during it (a broker left dead could not be drained);
// it is bounded by two minutes instead.
func CrashFault(t Target) Fault {
	return Fault{
		Name: "kill-9",
		Apply: func(ctx context.Context) error {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			return t.Crash(cctx)
		},
		Heal:          func(context.Context) error { return nil },
		Weight:        3,
		HealedOnApply: true,
	}
}

// Schedule rotates faults: every period it heals the current ones and
// applies a subset chosen by the seeded source: none, one, or up to
// MaxConcurrent at once (Jepsen's rotation of random fault subsets), each
// drawn in proportion to its Weight.
type Schedule struct {
	Faults []Fault
	Seed   uint64
	// Period is how long each set of faults (or quiet spell) lasts.
	Period time.Duration
	// MaxConcurrent bounds how many faults are applied together; zero
	// means one at a time.
	MaxConcurrent int
	// Cover applies every fault alone once, in an order drawn from the
	// seed, before any drawn set: a run that lasts that long has passed
	// every fault.
	Cover bool
	// Rounds, when positive, ends the run after that many sets (quiet
	// spells included) even if ctx is not done.
	Rounds int
	// Quiet, when positive, is how long the schedule waits after a heal
	// before it applies the next set: a window in which the clients'
	// recovery from the fault just healed is seen alone.
	Quiet time.Duration
	// Settle, when positive, is the least time between the end of one
	// set's application and the next set: a fault whose Apply takes long
	// (a bounce) still leaves the workload time to recover.
	Settle time.Duration
	// Log receives one line per change.
	Log io.Writer
	// Clock, when set, stamps each line of Log, so that faults can be
	// lined up with a history's call_ns and return_ns (pass the
	// recorder's Now).
	Clock func() int64

	mu     sync.Mutex
	events []FaultEvent
}

// FaultEvent is one fault applied or healed, stamped by Schedule.Clock.
type FaultEvent struct {
	At    int64
	Heal  bool // false: applied
	Fault string
}

// Events returns the faults applied and healed so far, in order; the
// liveness measurements (Liveness) start from them.
func (s *Schedule) Events() []FaultEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]FaultEvent(nil), s.events...)
}

// event records and logs one fault applied or healed.
func (s *Schedule) event(heal bool, name string) {
	var at int64
	if s.Clock != nil {
		at = s.Clock()
	}
	s.mu.Lock()
	s.events = append(s.events, FaultEvent{At: at, Heal: heal, Fault: name})
	s.mu.Unlock()
	if heal {
		s.logf("healed %s", name)
	} else {
		s.logf("applying %s", name)
	}
}

// pick draws up to max distinct faults by weight: first how many (0 to
// max, uniformly), then which.
func (s *Schedule) pick(rng *rand.Rand, max int) []Fault {
	n := rng.IntN(max + 1)
	left := append([]Fault(nil), s.Faults...)
	var out []Fault
	for ; n > 0 && len(left) > 0; n-- {
		total := 0
		for _, f := range left {
			total += f.weight()
		}
		r := rng.IntN(total)
		for j, f := range left {
			if r -= f.weight(); r < 0 {
				out = append(out, f)
				left = append(left[:j], left[j+1:]...)
				break
			}
		}
	}
	return out
}

// Run rotates faults until ctx is done, then heals. It returns the sets
// applied, in order: fault names joined by "+", "none" for quiet spells.
func (s *Schedule) Run(ctx context.Context) ([]string, error) {
	rng := rand.New(rand.NewPCG(s.Seed, 0xfa17))
	max := max(s.MaxConcurrent, 1)
	var applied []string
	var cur []Fault
	heal := func() error {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		var errs []error
		for _, f := range cur {
			if err := f.Heal(hctx); err != nil {
				errs = append(errs, fmt.Errorf("healing %s: %w", f.Name, err))
				continue
			}
			s.event(true, f.Name)
			if f.Recovered != nil {
				if err := f.Recovered(hctx); err != nil {
					errs = append(errs, fmt.Errorf("after healing %s: %w", f.Name, err))
				}
			}
		}
		cur = nil
		return errors.Join(errs...)
	}
	var cover []Fault
	if s.Cover {
		cover = append(cover, s.Faults...)
		rng.Shuffle(len(cover), func(i, j int) { cover[i], cover[j] = cover[j], cover[i] })
	}
	t := time.NewTicker(s.Period)
	defer t.Stop()
	for round := 0; ; round++ {
		healed := len(cur) > 0
		if err := heal(); err != nil {
			return applied, err
		}
		if s.Rounds > 0 && round >= s.Rounds {
			return applied, nil
		}
		if healed && s.Quiet > 0 {
			select {
			case <-ctx.Done():
				return applied, nil
			case <-time.After(s.Quiet):
			}
		}
		var set []Fault
		if len(cover) > 0 {
			set, cover = cover[:1], cover[1:]
		} else {
			set = s.pick(rng, max)
		}
		var names []string
		for _, f := range set {
			s.event(false, f.Name)
			if err := f.Apply(ctx); err != nil {
				if ctx.Err() != nil {
					return applied, heal()
				}
				return applied, errors.Join(fmt.Errorf("applying %s: %w", f.Name, err), heal())
			}
			if f.Note != nil {
				s.logf("%s: %s", f.Name, f.Note())
			}
			if f.HealedOnApply {
				s.event(true, f.Name)
			} else {
				cur = append(cur, f)
			}
			names = append(names, f.Name)
		}
		name := "none"
		if len(names) > 0 {
			name = strings.Join(names, "+")
		}
		applied = append(applied, name)
		s.logf("fault: %s", name)
		settled := time.After(s.Settle)
		for _, wait := range []<-chan time.Time{t.C, settled} {
			select {
			case <-ctx.Done():
				return applied, heal()
			case <-wait:
			}
		}
	}
}

// logf writes one line to Log, stamped by Clock when set.
func (s *Schedule) logf(format string, args ...any) {
	if s.Log == nil {
		return
	}
	if s.Clock != nil {
		fmt.Fprintf(s.Log, "%d ", s.Clock())
	}
	fmt.Fprintf(s.Log, format+"\n", args...)
}
