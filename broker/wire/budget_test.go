package wire

import (
	"context"
	"testing"
	"time"
)

func TestBudgetNonStrictAndFIFO(t *testing.T) {
	ctx := context.Background()
	b := NewBudget(100)
	// Granted while anything is left, even beyond the limit (Kafka's
	// non-strict SimpleMemoryPool).
	if err := b.Acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(ctx, 60); err != nil {
		t.Fatal(err)
	}
	if b.InUse() != 120 {
		t.Fatalf("in use %d", b.InUse())
	}
	order := make(chan int, 3)
	for i := 1; i <= 3; i++ {
		go func() {
			if err := b.Acquire(ctx, 50); err == nil {
				order <- i
			}
		}()
		// Queue them in a known order.
		deadline := time.Now().Add(2 * time.Second)
		for {
			b.mu.Lock()
			n := len(b.waiters)
			b.mu.Unlock()
			if n == i || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	select {
	case i := <-order:
		t.Fatalf("waiter %d granted while the budget is spent", i)
	case <-time.After(20 * time.Millisecond):
	}
	b.Release(60) // 60 in use: waiter 1 gets 50 (110), then nothing is left
	if got := <-order; got != 1 {
		t.Fatalf("first granted %d", got)
	}
	b.Release(60) // 50: waiter 2 (100), full again
	if got := <-order; got != 2 {
		t.Fatalf("second granted %d", got)
	}
	select {
	case i := <-order:
		t.Fatalf("waiter %d granted at the limit", i)
	case <-time.After(20 * time.Millisecond):
	}
	b.Release(50)
	if got := <-order; got != 3 {
		t.Fatalf("third granted %d", got)
	}
	if b.Peak() != 120 {
		t.Fatalf("peak %d", b.Peak())
	}
	b.Release(100)
	if b.InUse() != 0 {
		t.Fatalf("in use %d", b.InUse())
	}
}

func TestBudgetCancel(t *testing.T) {
	b := NewBudget(10)
	if err := b.Acquire(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := b.Acquire(ctx, 5); err == nil {
		t.Fatal("acquired from a spent budget")
	}
	b.Release(10)
	if b.InUse() != 0 || len(b.waiters) != 0 {
		t.Fatalf("in use %d, waiters %d", b.InUse(), len(b.waiters))
	}
	var nilBudget *Budget
	if err := nilBudget.Acquire(context.Background(), 1<<40); err != nil {
		t.Fatal(err)
	}
	nilBudget.Release(1 << 40)
}
