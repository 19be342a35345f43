package log

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentAppendReadRetentionFlush runs appenders on several
// partitions, readers, retention and the flusher at once (meant for -race).
// Every append gets a distinct contiguous offset range and readers only
// ever see whole valid batches.
func TestConcurrentAppendReadRetentionFlush(t *testing.T) {
	c := newFakeClock()
	o := testOpts(c)
	o.FlushCheckInterval = time.Millisecond
	o.FlushMaxDirtyBytes = 8 << 10
	m, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cfg := smallConfig()
	cfg.RetentionBytes = 32 << 10
	var logs []*Log
	for p := 0; p < 3; p++ {
		pc := cfg
		if p == 2 {
			pc.FlushMessages = 1 // fsync per append, shared by concurrent appenders
		}
		l, err := m.Create(TopicPartition{Topic: "c", Partition: int32(p)}, [16]byte{1}, pc)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	n := 60
	if testing.Short() {
		n = 20
	}
	var wg sync.WaitGroup
	var stop atomic.Bool
	var appended atomic.Int64
	for _, l := range logs {
		seen := make([]atomic.Bool, 4*n*3)
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < n; i++ {
					info, err := l.Append(batch(t, 3, fmt.Sprint(w), int64(i)), 0)
					if err != nil {
						t.Error(err)
						return
					}
					for o := info.FirstOffset; o <= info.LastOffset; o++ {
						if seen[o].Swap(true) {
							t.Errorf("offset %d assigned twice", o)
						}
					}
					appended.Add(1)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				off := l.LogStartOffset()
				res, err := l.Read(off, 4096, 1<<62, true)
				if err != nil {
					continue // retention may move the start between the two calls
				}
				for _, r := range res.Regions {
					var buf = make([]byte, r.Len())
					if _, err := r.(*region).ReadAt(buf, 0); err != nil {
						t.Errorf("region read: %v", err)
					}
					r.Release()
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			if _, err := m.ApplyRetention(); err != nil {
				t.Error(err)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for appended.Load() < int64(len(logs)*4*n) && !t.Failed() {
		time.Sleep(5 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	for _, l := range logs {
		if l.LogEndOffset() != int64(4*n*3) || l.Err() != nil {
			t.Fatalf("%s: LEO %d err %v", l.tp, l.LogEndOffset(), l.Err())
		}
		readAll(t, l, l.LogStartOffset())
	}
	if logs[2].RecoveryPoint() != logs[2].LogEndOffset() {
		t.Fatalf("flush.messages=1 left %d unflushed", logs[2].LogEndOffset()-logs[2].RecoveryPoint())
	}
}
