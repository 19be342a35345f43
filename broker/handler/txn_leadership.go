package handler

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/cascade-kafka/cascade/broker/partition"
	"github.com/cascade-kafka/cascade/broker/txn"
)

// The transaction coordinator of a cluster node has a shard for each
// __transaction_state partition this node leads (coordinator_leaders.go).
// Everything here runs on the loop goroutine, except the loaders' replays
// into their own new state machines.

// clusterShardFor is shardFor on a cluster node: the shard of id's
// partition when this node serves it; NOT_COORDINATOR when it does not
// lead the partition, COORDINATOR_LOAD_IN_PROGRESS while the partition
// loads. create (InitProducerId) makes __transaction_state if missing, as
// FindCoordinator does; without it a missing topic is errNoTxnState.
func (c *TxnCoordinator) clusterShardFor(id string, create bool) (*txnShard, error) {
	c.lead.pending(c.followLeadership)
	t, ok := c.env.Meta.Image().Topic(TransactionStateTopic)
	if !ok {
		if !create {
			return nil, errNoTxnState
		}
		if err := c.env.createInternalTopic(c.env.txnStateTopicSpec()); err != nil {
			return nil, fmt.Errorf("%w: %v", txn.ErrCoordinatorNotAvailable, err)
		}
		if t, ok = c.env.Meta.Image().Topic(TransactionStateTopic); !ok {
			return nil, fmt.Errorf("%w: %s not created", txn.ErrCoordinatorNotAvailable, TransactionStateTopic)
		}
		c.followLeadership()
	}
	if len(t.Partitions) == 0 {
		return nil, fmt.Errorf("%w: %s has no partitions", txn.ErrCoordinatorNotAvailable, TransactionStateTopic)
	}
	n := txn.PartitionFor(id, int32(len(t.Partitions)))
	if s := c.shards[n]; s != nil {
		return s, nil
	}
	if c.lead.code(n) == kerr.CoordinatorLoadInProgress.Code {
		return nil, fmt.Errorf("%w: %s-%d", txn.ErrCoordinatorLoading, TransactionStateTopic, n)
	}
	return nil, fmt.Errorf("%w: %s-%d not led here", txn.ErrNotCoordinator, TransactionStateTopic, n)
}

// clusterListable is the error ListTransactions answers on a cluster node
// while a partition it leads still loads, as Kafka's
// TransactionStateManager.listTransactionStates does; nil otherwise.
func (c *TxnCoordinator) clusterListable() error {
	c.lead.pending(c.followLeadership)
	if n, loading := c.lead.loadingAny(); loading {
		return fmt.Errorf("%w: %s-%d", txn.ErrCoordinatorLoading, TransactionStateTopic, n)
	}
	return nil
}

// followLeadership unloads the shards of partitions this node no longer
// leads in the latest image and starts loading those it has come to lead.
func (c *TxnCoordinator) followLeadership() {
	c.lead.follow(c.env, c.unloadShard, c.startLoad)
}

// startLoad replays partition n in the background into a new state
// machine at coordinator epoch epoch (the leader epoch), which serves once
// the loop installs it (Kafka's
// TransactionStateManager.loadTransactionsForTxnTopicPartition).
func (c *TxnCoordinator) startLoad(n int32, p *partition.Partition, gen uint64, epoch int32) {
	m := c.newShardMachine(epoch)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		err := c.replay(p, m)
		c.post(func() { c.finishLoad(n, &txnShard{n: n, m: m, p: p}, gen, err) })
	}()
}

// finishLoad serves a loaded shard, completing the transactions it left
// prepared; a load this node has since given up is dropped, and a failed
// one leaves the partition unserved (NOT_COORDINATOR) until the next image.
func (c *TxnCoordinator) finishLoad(n int32, s *txnShard, gen uint64, err error) {
	if c.lead.stale(n, gen) {
		return
	}
	if err != nil {
		c.env.logger().Error("loading __transaction_state", "partition", n, "err", err)
		delete(c.lead.led, n)
		return
	}
	l, _ := c.lead.loaded(n, gen)
	if c.shards == nil {
		c.shards = map[int32]*txnShard{}
	}
	c.shards[n] = s
	c.env.logger().Info("loaded __transaction_state partition", "partition", n, "coordinator_epoch", l.epoch)
	c.process(s, s.m.Loaded(), nil)
}

// unloadShard stops serving partition n: its state is dropped, and the
// markers its transactions are writing report to no one (writeMarkers), as
// Kafka's removeTransactionsForTxnTopicPartition; the partition's next
// leader completes them from the log.
func (c *TxnCoordinator) unloadShard(n int32) {
	if s := c.shards[n]; s != nil {
		s.unloaded.Store(true)
	}
	delete(c.shards, n)
}
