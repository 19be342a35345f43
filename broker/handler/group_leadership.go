package handler

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/group"
	"github.com/cascade-kafka/cascade/broker/partition"
	"github.com/cascade-kafka/cascade/broker/record"
)

// The group coordinator of a cluster node serves the __consumer_offsets
// partitions this node leads (coordinator_leaders.go). Everything here runs
// on the loop goroutine, except the loaders' log reads.

// servingCode returns the code a request of a cluster node answers instead
// of running, 0 to run it: NOT_COORDINATOR when a group it names is on a
// partition this node does not lead, COORDINATOR_LOAD_IN_PROGRESS while
// that partition loads (as Kafka's CoordinatorRuntime for a shard not
// active). ListGroups, which every coordinator answers for the groups it
// has, waits for no partition but one still loading, as Kafka's
// GroupCoordinatorService.listGroups fails with the loading shard's error.
func (c *GroupCoordinator) servingCode(req kmsg.Request) int16 {
	c.lead.pending(c.followLeadership)
	if _, list := req.(*kmsg.ListGroupsRequest); list {
		if _, loading := c.lead.loadingAny(); loading {
			return kerr.CoordinatorLoadInProgress.Code
		}
		return 0
	}
	for _, g := range group.GroupIDs(req) {
		if c.m == nil {
			return kerr.NotCoordinator.Code
		}
		if code := c.lead.code(c.m.Partition(g)); code != 0 {
			return code
		}
	}
	return 0
}

// followLeadership unloads the partitions this node no longer leads in the
// latest image and starts loading those it has come to lead.
func (c *GroupCoordinator) followLeadership() {
	c.lead.follow(c.env, c.unloadPartition, c.startLoad)
}

// startLoad reads partition n's log in the background; finishLoad replays
// what was read on the loop. Requests for its groups answer
// COORDINATOR_LOAD_IN_PROGRESS until then. The state machine is made with
// the first partition loaded, sized to the topic.
func (c *GroupCoordinator) startLoad(n int32, p *partition.Partition, gen uint64, _ int32) {
	if c.m == nil {
		gc := c.cfg
		if t, ok := c.env.Meta.Image().Topic(consumerOffsetsTopic); ok {
			gc.OffsetsTopicPartitions = int32(len(t.Partitions))
		}
		c.m, c.parts, c.img = group.New(gc), map[int32]*partition.Partition{}, nil
	}
	c.loaders.Add(1)
	go func() {
		defer c.loaders.Done()
		var batches []record.Batch
		next := p.LogStartOffset()
		err := forEachBatch(p, next, func(b record.Batch) error {
			batches = append(batches, b)
			next = b.NextOffset()
			return nil
		})
		select {
		case c.calls <- func() { c.finishLoad(n, p, gen, batches, next, err) }:
		case <-c.stop:
		}
	}()
}

// finishLoad replays the batches a loader read, then the log's tail from
// next (markers the transaction coordinator appended meanwhile), and
// serves partition n; a load this node has since given up (unloaded, or
// restarted at a new epoch) is dropped. A failed load leaves the partition
// unserved (NOT_COORDINATOR) until the next image.
func (c *GroupCoordinator) finishLoad(n int32, p *partition.Partition, gen uint64, batches []record.Batch, next int64, err error) {
	if c.lead.stale(n, gen) {
		return
	}
	for _, b := range batches {
		if err != nil {
			break
		}
		err = c.replayBatch(c.m, n, b)
	}
	if err == nil {
		err = forEachBatch(p, next, func(b record.Batch) error { return c.replayBatch(c.m, n, b) })
	}
	if err != nil {
		c.env.logger().Error("loading __consumer_offsets", "partition", n, "err", err)
		delete(c.lead.led, n)
		c.unloadPartition(n)
		return
	}
	l, _ := c.lead.loaded(n, gen)
	c.parts[n] = p
	c.img = nil // DeleteAbsentTopics for the groups just loaded
	c.syncTopics()
	c.m.LoadPartitionComplete(c.env.now(), n)
	c.env.logger().Info("loaded __consumer_offsets partition", "partition", n, "leader_epoch", l.epoch)
}

// unloadPartition stops serving partition n, as Kafka's
// CoordinatorRuntime.scheduleUnloadOperation: its groups are dropped from
// memory and the requests parked on them answer NOT_COORDINATOR, so their
// clients find the new coordinator.
func (c *GroupCoordinator) unloadPartition(n int32) {
	if c.m == nil {
		return
	}
	delete(c.parts, n)
	delete(c.written, n)
	c.m.Unload(n)
	for k := range c.seqs {
		if k.partition == n {
			delete(c.seqs, k)
		}
	}
	c.failWaiters(n, kerr.NotCoordinator.Code)
}
