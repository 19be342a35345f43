package matrix

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cascade-kafka/cascade/matrix/cluster"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// ClusterFaultScenarios are scenario 11: a client keeps working while the
// cluster target stops the node it depends on (the partition leader, the
// group coordinator, the transaction coordinator) and starts it again, and
// a consumer in a rack reads from that rack's follower (KIP-392). They
// stop nodes, so each runs alone (Solo) and leaves every node running and
// in every ISR, as it found the cluster.
func ClusterFaultScenarios() []Scenario {
	return []Scenario{leaderMoveScenario, coordinatorMoveScenario, txnCoordinatorMoveScenario, followerFetchScenario}
}

// faultTimeout bounds one fault cell: Apache Kafka's controlled shutdown,
// a JVM restart and the restarted node's catching up take 10 to 20 s on
// two loaded cores.
const faultTimeout = 90 * time.Second

// faultCluster returns the cell's cluster once every node runs and is in
// every ISR, or ErrTargetUnavailable on a target the matrix cannot control.
func faultCluster(ctx context.Context, e *Env) (cluster.Cluster, error) {
	ci := e.Cluster()
	if ci == nil {
		return nil, fmt.Errorf("%w: %s: the cluster scenarios need a cluster target", ErrTargetUnavailable, e.Target)
	}
	c := ci.Cluster()
	for _, id := range c.BrokerIDs() {
		if !c.Live(id) {
			return nil, fmt.Errorf("node %d is down before the cell starts", id)
		}
		if err := cluster.WaitInEveryISR(ctx, c, id); err != nil {
			return nil, fmt.Errorf("node %d before the cell starts: %w", id, err)
		}
	}
	return c, nil
}

// stopNode stops node id (SIGTERM: Kafka's controlled shutdown hands its
// leaderships over first) and returns a function that starts it again and
// waits until it is back in every ISR. The cell calls it, or the deferred
// call does; either way the cluster is whole again when the cell ends.
func stopNode(ctx context.Context, c cluster.Cluster, id int) (restart func() error, err error) {
	if err := c.Stop(id); err != nil {
		return nil, fmt.Errorf("stop node %d: %w", id, err)
	}
	var once sync.Once
	var rerr error
	return func() error {
		once.Do(func() {
			// The cell's context may have ended; the next cell needs the node.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
			defer cancel()
			if err := c.Restart(rctx, id); err != nil {
				rerr = fmt.Errorf("restart node %d: %w", id, err)
				return
			}
			if err := cluster.WaitInEveryISR(rctx, c, id); err != nil {
				rerr = fmt.Errorf("restarted node %d: %w", id, err)
			}
		})
		return rerr
	}, nil
}

// ringPeer is the client after client in clients (the first after the
// last): the leader-move cells pair every client once as the producer and
// once as the reader, instead of every pair, which would stop a node
// thirty-six times for six clients.
func ringPeer(client string, clients []string) []string {
	for i, c := range clients {
		if c == client {
			return []string{clients[(i+1)%len(clients)]}
		}
	}
	return []string{client}
}

// moveBatch is how many records each produce command of the leader-move
// cell carries; moveKeys how many keys they cycle through.
const (
	moveBatch = 5
	moveKeys  = 3
)

// sentBatch is one produce command of the leader-move cell.
type sentBatch struct {
	recs  []driver.Record
	dls   []driver.Delivery
	start time.Time
}

var leaderMoveScenario = Scenario{
	ID:    "11.leader-move",
	Title: "idempotent acks=all producer and a reader while the partition's leader is stopped and started again: every record once, at its offset, key order kept",
	Pair: func(ctx context.Context, e *Env, prod, cons driver.Driver) (string, error) {
		c, err := faultCluster(ctx, e)
		if err != nil {
			return "", err
		}
		if prod == cons {
			if cons, err = e.OpenAnother(ctx, cons.Client()); err != nil {
				return "", err
			}
			defer cons.Close()
		}
		topic := e.Topic("leader-move-" + prod.Client() + "-" + cons.Client())
		if err := createTopic(ctx, e, prod, topic, 1, nil); err != nil {
			return "", err
		}
		old, err := cluster.Leader(ctx, c, topic, 0)
		if err != nil {
			return "", err
		}

		// The producer sends batch after batch, each one command waiting
		// for its acknowledgements, until told to stop.
		var (
			mu      sync.Mutex
			batches []sentBatch
			stop    = make(chan struct{})
			prodErr = make(chan error, 1)
		)
		acked := func(after time.Time) int {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, b := range batches {
				if !b.start.Before(after) {
					n++
				}
			}
			return n
		}
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					prodErr <- nil
					return
				default:
				}
				b := sentBatch{start: time.Now()}
				for j := 0; j < moveBatch; j++ {
					n := i*moveBatch + j
					b.recs = append(b.recs, driver.Record{Partition: 0, Key: []byte(fmt.Sprintf("k%d", n%moveKeys)), Value: []byte(fmt.Sprintf("%s-%d", topic, n))})
				}
				dls, err := produceOK(ctx, prod, driver.Produce{Topic: topic, Records: b.recs, Acks: -1, Idempotent: true})
				if err != nil {
					prodErr <- fmt.Errorf("batch %d: %w", i, err)
					return
				}
				b.dls = dls
				mu.Lock()
				batches = append(batches, b)
				mu.Unlock()
				if !sleepCtx(ctx, 50*time.Millisecond) {
					prodErr <- ctx.Err()
					return
				}
			}
		}()
		waitAcked := func(n int, after time.Time, what string) error {
			for acked(after) < n {
				select {
				case err := <-prodErr:
					if err == nil {
						err = errors.New("stopped")
					}
					return fmt.Errorf("producer, waiting for %s: %w", what, err)
				case <-ctx.Done():
					return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
				case <-time.After(20 * time.Millisecond):
				}
			}
			return nil
		}

		// The reader reads what is there, command after command, until it
		// has read to the end of what the producer wrote.
		var read []driver.Record
		end := make(chan int64, 1)
		readErr := make(chan error, 1)
		go func() {
			next, want := int64(0), int64(-1)
			for want < 0 || next < want {
				select {
				case w := <-end:
					want = w
				default:
				}
				res, err := cons.Consume(ctx, driver.Consume{Topic: topic, Partition: 0, From: next, Count: 100, TimeoutMs: 1000})
				if err == nil && res.Error != nil {
					err = res.Error
				}
				if err != nil {
					readErr <- fmt.Errorf("%s reading from %d: %w", cons.Client(), next, err)
					return
				}
				for _, r := range res.Records {
					if r.Offset != next {
						readErr <- fmt.Errorf("%s read offset %d after %d", cons.Client(), r.Offset, next-1)
						return
					}
					read = append(read, r)
					next++
				}
				if ctx.Err() != nil {
					readErr <- ctx.Err()
					return
				}
			}
			readErr <- nil
		}()

		restart := func() error { return nil }
		fail := func(err error) (string, error) {
			close(stop)
			<-prodErr
			if rerr := restart(); rerr != nil {
				err = errors.Join(err, rerr)
			}
			return "", err
		}
		if err := waitAcked(2, time.Time{}, "the first batches"); err != nil {
			return fail(err)
		}
		stopped := time.Now()
		r, err := stopNode(ctx, c, old)
		if err != nil {
			return fail(err)
		}
		restart = r
		moved, err := cluster.WaitLeader(ctx, c, topic, 0, old)
		if err != nil {
			return fail(fmt.Errorf("after stopping the leader, node %d: %w", old, err))
		}
		movedAfter := time.Since(stopped)
		if err := waitAcked(2, time.Now(), "batches led by the new leader"); err != nil {
			return fail(err)
		}
		if err := restart(); err != nil {
			return fail(err)
		}
		if err := waitAcked(1, time.Now(), "a batch after the restart"); err != nil {
			return fail(err)
		}
		close(stop)
		if err := <-prodErr; err != nil {
			return "", fmt.Errorf("producer: %w", err)
		}
		var want int64
		mu.Lock()
		for _, b := range batches {
			want += int64(len(b.recs))
		}
		mu.Unlock()
		end <- want
		if err := <-readErr; err != nil {
			return "", err
		}
		if err := checkLeaderMove(batches, read); err != nil {
			return "", err
		}
		return fmt.Sprintf("stopped leader node %d; node %d led after %v; %d batches of %d acknowledged, read by %s once each at their offsets, key order kept; node %d restarted and back in every ISR",
			old, moved, movedAfter.Round(100*time.Millisecond), len(batches), moveBatch, cons.Client(), old), nil
	},
	Peers:   ringPeer,
	Timeout: faultTimeout,
	Solo:    true,
	Cluster: true,
}

// checkLeaderMove checks the leader-move cell's log as read: the records
// the producer wrote, each once, at the offset its acknowledgement named,
// so that each key's records are in the order they were sent.
func checkLeaderMove(batches []sentBatch, read []driver.Record) error {
	at := map[string]int64{}
	for i, r := range read {
		v := string(r.Value)
		if prev, dup := at[v]; dup {
			return fmt.Errorf("record %q read at offsets %d and %d", v, prev, r.Offset)
		}
		at[v] = int64(i)
	}
	lastOfKey := map[string]int64{}
	n := 0
	for _, b := range batches {
		for j, rec := range b.recs {
			n++
			v, dl := string(rec.Value), b.dls[j]
			got, ok := at[v]
			switch {
			case !ok:
				return fmt.Errorf("record %q acknowledged at offset %d is not in the log", v, dl.Offset)
			case got != dl.Offset:
				return fmt.Errorf("record %q acknowledged at offset %d is at offset %d", v, dl.Offset, got)
			}
			if prev, seen := lastOfKey[string(rec.Key)]; seen && got <= prev {
				return fmt.Errorf("key %s: record %q at offset %d is not after the key's previous record at %d", rec.Key, v, got, prev)
			}
			lastOfKey[string(rec.Key)] = got
		}
	}
	if len(read) != n {
		return fmt.Errorf("the log holds %d records, the producer wrote %d", len(read), n)
	}
	return nil
}
