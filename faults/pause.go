package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"time"
)

// Pauser is a Target whose process can be paused: SIGSTOP, as Jepsen's
// pause nemesis does, freezing the broker with its connections open, so
// clients see requests time out rather than connections refused.
type Pauser interface {
	// Pause stops the broker process (SIGSTOP) and returns the function
	// that continues it (SIGCONT). Resuming a process that has since
	// exited or been replaced by a restart is not an error.
	Pause() (resume func() error, err error)
}

// Pause bounds: a pause lasts at least minPause and at most maxPause,
// drawn from the seed. The upper bound stays below the workload's
// delivery timeouts (4 s) plus their retries and far below a group
// member's session timeout (groupSessionTimeout), so a pause is felt
// as timeouts and unknown outcomes, not as lost group members.
const (
	minPause = 500 * time.Millisecond
	maxPause = 3 * time.Second
)

// PauseFault pauses the target with SIGSTOP for a duration drawn from
// seed, between minPause and maxPause, then continues it with SIGCONT.
// Apply holds the pause itself, so the pause lasts exactly what was drawn
// whatever the schedule's period, and the schedule logs the fault healed
// the moment the broker runs again (HealedOnApply), which is where the
// liveness figures measure recovery from. A run that ends during a pause
// continues the broker at once, so the drain always finds it running.
func PauseFault(t Pauser, seed uint64) Fault {
	rng := rand.New(rand.NewPCG(seed, 0x5a05e))
	var (
		mu   sync.Mutex
		last time.Duration
	)
	return Fault{
		Name: "pause",
		Apply: func(ctx context.Context) error {
			d := minPause + time.Duration(rng.Int64N(int64(maxPause-minPause)+1))
			mu.Lock()
			last = d
			mu.Unlock()
			resume, err := t.Pause()
			if err != nil {
				return err
			}
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
			return resume()
		},
		Heal:          func(context.Context) error { return nil },
		Weight:        2,
		HealedOnApply: true,
		Note: func() string {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Sprintf("SIGSTOP for %v", last.Round(time.Millisecond))
		},
	}
}

// Pause implements Pauser.
func (p *Process) Pause() (func() error, error) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return nil, errors.New("pause: cascade is not running")
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("pause: %w", err)
	}
	fmt.Fprintf(p.log, "=== SIGSTOP at %s\n", time.Now().Format(time.RFC3339Nano))
	return func() error {
		err := cmd.Process.Signal(syscall.SIGCONT)
		if errors.Is(err, os.ErrProcessDone) {
			return nil // killed and restarted meanwhile
		}
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		return nil
	}, nil
}

// Pause implements Pauser. The resume signals the process it paused only
// while it is still the broker's process: a crash fault may have killed
// and replaced it meanwhile.
func (k Kafka) Pause() (func() error, error) {
	pid := k.Broker.Pid()
	if pid <= 0 {
		return nil, errors.New("pause: kafka is not running")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("pause: %w", err)
	}
	if err := appendLine(k.Broker.LogPath(), fmt.Sprintf("=== SIGSTOP at %s", time.Now().Format(time.RFC3339Nano))); err != nil {
		return nil, errors.Join(err, syscall.Kill(pid, syscall.SIGCONT))
	}
	return func() error {
		if k.Broker.Pid() != pid {
			return nil
		}
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("resume: %w", err)
		}
		return nil
	}, nil
}
