package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// driver runs one producer or one consumer with a particular client
// library. Both methods must return once ctx ends.
type driver interface {
	produce(ctx context.Context, job *produceJob) error
	consume(ctx context.Context, job *consumeJob) error
}

// driverFor returns w's client. The raw client builds its batches here,
// before any phase's CPU is counted.
func driverFor(w Workload) (driver, error) {
	switch w.Client {
	case ClientFranzGo:
		return franzDriver{}, nil
	case ClientConfluent:
		return confluentDriver{}, nil
	case ClientRaw:
		t, err := newRawTemplates(w)
		if err != nil {
			return nil, err
		}
		return &rawDriver{t: t}, nil
	}
	return nil, fmt.Errorf("%w: unknown client %q", errWorkload, w.Client)
}

// producerBufferBytes bounds the records a producer holds unacknowledged,
// as Kafka's buffer.memory (default 32 MiB) does.
const producerBufferBytes = 32 << 20

// produceJob is one producer's share: record ids first..first+count-1.
type produceJob struct {
	addr, topic string
	w           Workload
	first       int64
	count       int64
	// rate is this producer's offered records/s; 0 means as fast as the
	// client accepts.
	rate float64
	lat  *latencies
	// offered counts sends handed to the client, acked successful
	// acknowledgements, failed failed ones.
	offered, acked, failed *atomic.Int64
	errs                   *firstError
	// skip is a record id that is counted as sent but never sent: the
	// planted loss that tests use to prove verification catches one.
	skip int64
	// dup and corrupt are record ids whose batch the raw producer sends
	// twice, or sends with another batch's records under a valid CRC: the
	// planted duplicate and corruption. -1 plants nothing.
	dup, corrupt int64
}

// consumeJob is one consumer's share: the partitions in ends, each read
// from offset 0 up to (excluding) its end offset.
type consumeJob struct {
	addr, topic string
	w           Workload
	ends        map[int32]int64
	v           *verifier
	consumed    *atomic.Int64
	bytes       *atomic.Int64
	// done is when the job read the last record of its partitions; the
	// consume phase ends at the latest done, before the clients are closed.
	done time.Time
}

// ended records that the job has read every record it was given.
func (j *consumeJob) ended() { j.done = time.Now() }

// firstError keeps the first of many asynchronous errors.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// pacer schedules the k-th send of a producer at start + k/rate.
type pacer struct {
	start time.Time
	every time.Duration
}

func newPacer(rate float64) *pacer {
	if rate <= 0 {
		return nil
	}
	return &pacer{start: time.Now(), every: time.Duration(float64(time.Second) / rate)}
}

// offer waits until send k is due and returns the time it was due, which
// is when the send counts as offered. Without a pacer it returns now.
func (p *pacer) offer(ctx context.Context, k int64) (time.Time, error) {
	if p == nil {
		return time.Now(), nil
	}
	due := p.start.Add(time.Duration(k) * p.every)
	if d := time.Until(due); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return due, ctx.Err()
		}
	}
	return due, nil
}
