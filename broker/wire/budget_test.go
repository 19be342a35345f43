package wire

import (
	"context"
	"sync"
	"testing"
	"time"
)

// waiting returns how many leases wait on b.
func waiting(b *Budget) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

// growAsync grows l by n in a goroutine and returns a channel closed once
// it is granted.
func growAsync(t *testing.T, b *Budget, l *Lease, n int64) <-chan struct{} {
	t.Helper()
	before := waiting(b)
	done := make(chan struct{})
	go func() {
		if err := l.Grow(context.Background(), n); err == nil {
			close(done)
		}
	}()
	// Queue it before the next one, so the order is known.
	deadline := time.Now().Add(2 * time.Second)
	for waiting(b) == before && time.Now().Before(deadline) {
		select {
		case <-done:
			return done
		default:
		}
		time.Sleep(time.Millisecond)
	}
	return done
}

func granted(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(20 * time.Millisecond):
		return false
	}
}

func TestBudgetOvercommitsOneLease(t *testing.T) {
	ctx := context.Background()
	b := NewBudget(100)
	a, o, c, d := b.Lease(), b.Lease(), b.Lease(), b.Lease()
	if err := a.Grow(ctx, 60); err != nil {
		t.Fatal(err)
	}
	// Does not fit, but no lease is overcommitted: o becomes it, as
	// Kafka's non-strict pool grants one request beyond the limit.
	if err := o.Grow(ctx, 60); err != nil {
		t.Fatal(err)
	}
	cGranted := growAsync(t, b, c, 50)
	dGranted := growAsync(t, b, d, 10)
	if granted(cGranted) || granted(dGranted) {
		t.Fatal("granted beyond the limit to a second lease, or out of order")
	}
	// The overcommitted lease grows while others wait: it can always
	// finish its request.
	if err := o.Grow(ctx, 30); err != nil {
		t.Fatal(err)
	}
	if b.InUse() != 150 || b.Peak() != 150 {
		t.Fatalf("in use %d, peak %d", b.InUse(), b.Peak())
	}
	a.Release() // 90 in use: c (50) does not fit, o still holds the right
	if granted(cGranted) || granted(dGranted) {
		t.Fatal("granted while the overcommitted lease holds")
	}
	o.Release() // 0: c fits, then d
	if !granted(cGranted) || !granted(dGranted) {
		t.Fatal("waiters not granted in order once the budget was free")
	}
	if b.InUse() != 60 {
		t.Fatalf("in use %d", b.InUse())
	}
	c.Shrink(20)
	if c.Held() != 20 || b.InUse() != 30 {
		t.Fatalf("after shrink: held %d, in use %d", c.Held(), b.InUse())
	}
	c.Release()
	d.Release()
	if b.InUse() != 0 || len(b.waiters) != 0 || b.over != nil {
		t.Fatalf("in use %d, waiters %d, over %v", b.InUse(), len(b.waiters), b.over)
	}
}

func TestBudgetCancel(t *testing.T) {
	b := NewBudget(10)
	a, o, w := b.Lease(), b.Lease(), b.Lease()
	if err := a.Grow(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	if err := o.Grow(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := w.Grow(ctx, 5); err == nil {
		t.Fatal("granted from a spent budget")
	}
	a.Release()
	o.Release()
	w.Release()
	if b.InUse() != 0 || len(b.waiters) != 0 {
		t.Fatalf("in use %d, waiters %d", b.InUse(), len(b.waiters))
	}
	var nilBudget *Budget
	l := nilBudget.Lease()
	if err := l.Grow(context.Background(), 1<<40); err != nil {
		t.Fatal(err)
	}
	l.Release()
}

// TestBudgetHalfReadLeasesNeverDeadlock grows many leases in small steps
// at once, as connections reading large frames in chunks do, to far more
// than the limit together: each must finish, and the bytes reserved never
// exceed the limit plus one lease.
func TestBudgetHalfReadLeasesNeverDeadlock(t *testing.T) {
	const (
		limit  = 100
		leases = 20
		steps  = 10
		step   = 10
	)
	b := NewBudget(limit)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := b.Lease()
			defer l.Release()
			for range steps {
				if err := l.Grow(ctx, step); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("leases deadlocked")
	}
	if p := b.Peak(); p > limit+steps*step {
		t.Fatalf("peak %d above the limit plus one lease", p)
	}
	if b.InUse() != 0 {
		t.Fatalf("in use %d", b.InUse())
	}
}

// TestRetainsFrame checks which decoded requests keep their frame's bytes
// reserved: those with byte fields, and flexible versions (unknown tagged
// fields alias the frame).
func TestRetainsFrame(t *testing.T) {
	for _, tc := range []struct {
		key, version int16
		want         bool
	}{
		{produceKey, 7, true},   // records
		{joinGroupKey, 5, true}, // protocol metadata
		{syncGroupKey, 3, true}, // assignments
		{1, 11, false},          // Fetch: ids and numbers only
		{1, 12, true},           // flexible
		{ApiVersionsKey, 2, false},
		{metadataKey, 8, false},
	} {
		if got := retainsFrame(tc.key, tc.version); got != tc.want {
			t.Errorf("key %d v%d: retains %t, want %t", tc.key, tc.version, got, tc.want)
		}
	}
}
