package wire

import (
	"context"
	"sync"
)

// Budget is the broker-wide memory budget for requests being read, decoded
// and handled: Kafka's queued.max.request.bytes, which Kafka implements as a
// SimpleMemoryPool shared by every connection. Each request holds a Lease
// that grows as its bytes arrive and as it is decoded, so a connection
// holds budget only for what it has delivered, never for what a frame
// header merely announces.
//
// A grant that fits under the limit is made at once. One that does not is
// made anyway to one lease at a time, the overcommitted lease, which keeps
// that right until it is released: like Kafka's pool in its non-strict
// mode, no request is refused for its size, and because that one lease can
// always finish, leases waiting half-read can never deadlock the budget.
// Every other lease that does not fit waits (its connection is not read,
// as Kafka mutes the channel) until requests in flight release theirs. So
// the bytes reserved at once never exceed the limit plus one lease.
//
// Waiting leases are served in arrival order, so that a flood of requests
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
	// over is the lease allowed beyond the limit, or nil.
	over *Lease
}

type budgetWaiter struct {
	l       *Lease
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

// Lease is one request's share of a Budget. Its methods are for one
// goroutine at a time (the request's reader, then its executor). A Lease
// of the nil Budget holds nothing and never waits.
type Lease struct {
	b    *Budget
	held int64
}

// Lease returns an empty lease on b.
func (b *Budget) Lease() *Lease { return &Lease{b: b} }

// Held returns the bytes the lease holds.
func (l *Lease) Held() int64 {
	if l == nil {
		return 0
	}
	return l.held
}

// Grow adds n bytes to the lease, waiting while they do not fit and
// another lease is overcommitted, or earlier leases wait, or until ctx is
// done.
func (l *Lease) Grow(ctx context.Context, n int64) error {
	if l == nil || l.b == nil || n <= 0 {
		return nil
	}
	b := l.b
	b.mu.Lock()
	if b.admitLocked(l, n, len(b.waiters) == 0) {
		b.takeLocked(l, n)
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{l: l, n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !w.granted {
		for i, o := range b.waiters {
			if o == w {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
		b.grantLocked() // the next waiter may fit now
	}
	// A grant that raced the cancel stays held; the caller releases
	// the lease.
	return ctx.Err()
}

// admitLocked reports whether n more bytes may be granted to l now: always
// to the overcommitted lease; otherwise, when first in line, if they fit or
// if no lease is overcommitted, in which case l becomes it.
func (b *Budget) admitLocked(l *Lease, n int64, first bool) bool {
	switch {
	case l == b.over:
		return true
	case !first:
		return false
	case b.inUse+n <= b.limit:
		return true
	case b.over == nil:
		b.over = l
		return true
	}
	return false
}

func (b *Budget) takeLocked(l *Lease, n int64) {
	l.held += n
	b.inUse += n
	b.peak = max(b.peak, b.inUse)
}

// grantLocked grants waiting leases in order while the head is admitted;
// the overcommitted lease is granted wherever it waits.
func (b *Budget) grantLocked() {
	for i := 0; i < len(b.waiters); {
		w := b.waiters[i]
		if !b.admitLocked(w.l, w.n, i == 0) {
			i++ // past the head, only the overcommitted lease is admitted
			continue
		}
		b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
		b.takeLocked(w.l, w.n)
		w.granted = true
		close(w.ready)
		i = 0
	}
}

// Shrink releases what the lease holds above n bytes.
func (l *Lease) Shrink(n int64) {
	if l == nil || l.b == nil || l.held <= n {
		return
	}
	b := l.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inUse -= l.held - max(n, 0)
	l.held = max(n, 0)
	if b.inUse < 0 {
		panic("wire: budget released more than was granted")
	}
	if l.held == 0 && b.over == l {
		b.over = nil
	}
	b.grantLocked()
}

// Release returns everything the lease holds, and its right to exceed the
// limit if it had it. The lease may be grown again afterwards.
func (l *Lease) Release() {
	if l == nil || l.b == nil {
		return
	}
	if l.held > 0 {
		l.Shrink(0)
		return
	}
	b := l.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.over == l {
		b.over = nil
		b.grantLocked()
	}
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
