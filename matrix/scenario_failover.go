package matrix

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cascade-kafka/cascade/matrix/cluster"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// ClusterFaultScenarios are scenario 11: a client keeps working while the
// cluster target stops the node it depends on (the partition leader, the
// group coordinator, the transaction coordinator) and starts it again, and
// a consumer in a rack reads from that rack's follower (KIP-392). The
// node-stop cells run alone (Solo) and leave every node running and in
// every ISR, as they found the cluster.
func ClusterFaultScenarios() []Scenario {
	return []Scenario{followerFetchScenario, nodeStopScenario}
}

// faultTimeout bounds one fault cell: Apache Kafka's controlled shutdown,
// a JVM restart and the restarted node's catching up take 10 to 20 s on
// two loaded cores, and a transaction's end waits up to txnMoveTimeout.
const faultTimeout = 150 * time.Second

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
// waits until it is back in every ISR and leads its preferred partitions
// again. The cell calls it, or the deferred
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
				return
			}
			// So that the next cell finds leaders (and coordinators) spread
			// over every node again, not all away from this one.
			if err := cluster.WaitPreferredLeaders(rctx, c); err != nil {
				rerr = fmt.Errorf("after restarting node %d: %w", id, err)
			}
		})
		return rerr
	}, nil
}

// ringPeer is the client after client in clients (the first after the
// last): the node-stop cells pair every client once as the producer and
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

// moveCodes are the errors a client may pass on to the application while
// a leader or coordinator moves (Kafka's retriable errors of the move, and
// the client's own connection errors to the stopped node); a cell asks
// again after them.
var moveCodes = map[string]bool{
	"OFFSET_NOT_AVAILABLE": true, "NOT_LEADER_OR_FOLLOWER": true, "NOT_LEADER_FOR_PARTITION": true, "LEADER_NOT_AVAILABLE": true,
	"NOT_ENOUGH_REPLICAS": true,
	"FENCED_LEADER_EPOCH": true, "UNKNOWN_LEADER_EPOCH": true, "NOT_COORDINATOR": true,
	"COORDINATOR_NOT_AVAILABLE": true, "COORDINATOR_LOAD_IN_PROGRESS": true, "REQUEST_TIMED_OUT": true,
	"CLIENT_ERROR": true, "CLIENT_TIMEOUT": true,
}

// duringMove reports an error in moveCodes.
func duringMove(err error) bool { return moveCodes[driver.Code(err)] }

// checkLeaderMove checks the node-stop cell's log as read: every record
// the producer was told was written is there once, at the offset its
// acknowledgement named, so that each key's acknowledged records are in
// the order they were sent; a record the producer was told failed is there
// at most once (a retry after a lost answer may have written it); no other
// record is.
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
	found := 0
	for _, b := range batches {
		for j, rec := range b.recs {
			v, dl := string(rec.Value), b.dls[j]
			got, ok := at[v]
			if ok {
				found++
			}
			if dl.Error != nil {
				continue
			}
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
	if len(read) != found {
		return fmt.Errorf("the log holds %d records, %d of them written by the producer", len(read), found)
	}
	return nil
}
