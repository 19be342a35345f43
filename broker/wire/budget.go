package wire

import (
	"context"
	"sync"
)

// Budget is the broker-wide memory budget for requests being read, decoded
// and handled: Kafka's queued.max.request.bytes, which Kafka implements as a
// SimpleMemoryPool shared by every connection. Like Kafka's pool in its
// non-strict mode, a reservation is granted whenever anything is left, even
// if it is larger than what is left, and the reader of a connection whose
// reservation is not granted stops reading (Kafka mutes the channel) until
// requests in flight release theirs. So no request is ever refused for its
// size, and the bytes reserved at once never exceed the limit plus one
// reservation.
//
// Waiting readers are served in arrival order, so that a flood of requests
// on many connections delays an ordinary client by at most one turn of the
// queue and never starves it.
//
// A Budget is safe for concurrent use. The nil *Budget is unbounded.
type Budget struct {
	limit int64

	mu      sync.Mutex
	inUse   int64
	peak    int64
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n       int64
	ready   chan struct{}
	granted bool
}

// NewBudget returns a budget of limit bytes; limit <= 0 returns nil, the
// unbounded budget (Kafka's queued.max.request.bytes=-1).
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		return nil
	}
	return &Budget{limit: limit}
}

// Limit returns the configured limit, or 0 for the unbounded budget.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Acquire reserves n bytes, waiting while nothing is left or earlier
// readers wait, or until ctx is done.
func (b *Budget) Acquire(ctx context.Context, n int64) error {
	if b == nil || n <= 0 {
		return nil
	}
	b.mu.Lock()
	if len(b.waiters) == 0 && b.inUse < b.limit {
		b.takeLocked(n)
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.granted {
		b.inUse -= n
		b.grantLocked()
	} else {
		for i, o := range b.waiters {
			if o == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
	}
	return ctx.Err()
}

func (b *Budget) takeLocked(n int64) {
	b.inUse += n
	b.peak = max(b.peak, b.inUse)
}

// grantLocked grants waiting reservations in order while anything is left.
func (b *Budget) grantLocked() {
	for len(b.waiters) > 0 && b.inUse < b.limit {
		w := b.waiters[0]
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		b.takeLocked(w.n)
		w.granted = true
		close(w.ready)
	}
}

// Release returns n bytes reserved by Acquire.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inUse -= n
	if b.inUse < 0 {
		panic("wire: budget released more than was acquired")
	}
	b.grantLocked()
}

// InUse returns the bytes reserved now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inUse
}

// Peak returns the most bytes ever reserved at once.
func (b *Budget) Peak() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}
