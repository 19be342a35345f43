package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// The shaping faults' draws: each direction between two brokers delayed
// by slowMin to slowMax, as across data centres a continent apart; or
// each pair's bandwidth capped at narrowMin to narrowMax bits per second,
// below what a follower needs to keep up with the suite's producers, so
// that its fetches fall behind the leader's log end for the fault period.
const (
	slowMin   = 50 * time.Millisecond
	slowMax   = 150 * time.Millisecond
	narrowMin = 1_000_000
	narrowMax = 4_000_000
)

// shapingFaults returns slow:brokers and narrow:brokers on t.Net, their
// delays and rates drawn from seed (a stream of their own, so that the
// other faults' draws are those of a suite without them).
func (t *ClusterTarget) shapingFaults(seed uint64) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0x5ea9e))
	var mu sync.Mutex
	draw := func(lo, hi int64) int64 {
		mu.Lock()
		defer mu.Unlock()
		return lo + rng.Int64N(hi-lo+1)
	}
	return []Fault{
		t.shapeFault("slow:brokers", func(a, b int) (string, error) {
			d := time.Duration(draw(int64(slowMin), int64(slowMax))).Round(time.Millisecond)
			return d.String(), t.Net.Delay(a, b, d)
		}),
		t.shapeFault("narrow:brokers", func(a, b int) (string, error) {
			r := draw(narrowMin, narrowMax) / 10_000 * 10_000
			return fmt.Sprintf("%.2f Mbit/s", float64(r)/1e6), t.Net.Limit(a, b, r)
		}),
	}
}

// shapeFault applies shape to every pair of nodes (each a broker and a
// controller) and holds it for the fault period; the heal removes every
// delay and limit. The clients' own connections are not shaped.
func (t *ClusterTarget) shapeFault(name string, shape func(a, b int) (string, error)) Fault {
	var note string
	return Fault{
		Name: name,
		Apply: func(context.Context) error {
			var parts []string
			for a := 1; a <= t.Net.Nodes(); a++ {
				for b := a + 1; b <= t.Net.Nodes(); b++ {
					what, err := shape(a, b)
					if err != nil {
						return err
					}
					parts = append(parts, fmt.Sprintf("%d-%d %s", a, b, what))
				}
			}
			note = strings.Join(parts, ", ")
			return nil
		},
		Heal: func(context.Context) error { return t.Net.Unshape() },
		Note: func() string { return note },
	}
}
