package group

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Transactional offset commits (KIP-98, KIP-447), as Kafka's
// OffsetMetadataManager: TxnOffsetCommit writes its offsets to
// __consumer_offsets in a transactional batch of the producer; they stay
// pending, invisible to OffsetFetch, until the transaction coordinator
// writes the commit or abort marker to that partition, which the caller
// reports with CompleteTransaction (and Replay sees as a control batch).

// pendingTxn names one producer's pending offsets of one group.
type pendingTxn struct {
	group string
	pid   int64
}

func (c *Coordinator) pending() map[pendingTxn]map[tp]offsetEntry {
	if c.txnOffsets == nil {
		c.txnOffsets = map[pendingTxn]map[tp]offsetEntry{}
	}
	return c.txnOffsets
}

func (c *Coordinator) addPending(group string, pid int64, t tp, e offsetEntry) {
	k := pendingTxn{group, pid}
	m := c.pending()[k]
	if m == nil {
		m = map[tp]offsetEntry{}
		c.pending()[k] = m
	}
	m[t] = e
}

// hasPending reports whether a transaction has an offset of group's t
// pending.
func (c *Coordinator) hasPending(group string, t tp) bool {
	for k, m := range c.txnOffsets {
		if k.group == group {
			if _, ok := m[t]; ok {
				return true
			}
		}
	}
	return false
}

// validateTxnCommit is Kafka's validateTransactionalOffsetCommit: a
// group-level error, or the validator of each partition. Before
// TxnOffsetCommit v6 a client does not know STALE_MEMBER_EPOCH, so Kafka's
// TxnOffsetCommitRequest.supportsStaleMemberEpochError turns it into
// ILLEGAL_GENERATION, for the group and for each partition.
func (c *Coordinator) validateTxnCommit(req *kmsg.TxnOffsetCommitRequest) (partitionValidator, *kerr.Error) {
	if req.Group == "" {
		return nil, kerr.InvalidGroupID
	}
	if cg := c.consumer[req.Group]; cg != nil {
		validate, err := cg.validateConsumerCommit(req.MemberID, req.InstanceID, req.Generation, true, req.Version)
		if req.Version >= 6 {
			return validate, err
		}
		if err == kerr.StaleMemberEpoch {
			err = kerr.IllegalGeneration
		}
		if validate == nil {
			return nil, err
		}
		return func(id [16]byte, p int32) *kerr.Error {
			if err := validate(id, p); err != nil {
				return kerr.IllegalGeneration
			}
			return nil
		}, err
	}
	return nil, c.validateClassicTxnCommit(req)
}

// validateClassicTxnCommit is ClassicGroup.validateOffsetCommit for a
// transactional commit, creating the simple group a commit outside group
// management names.
func (c *Coordinator) validateClassicTxnCommit(req *kmsg.TxnOffsetCommitRequest) *kerr.Error {
	// Producers older than KIP-447 send no group metadata.
	anonymous := req.Generation < 0 && req.MemberID == "" && req.InstanceID == nil
	g := c.classic[req.Group]
	if g == nil {
		if req.Generation < 0 {
			c.classic[req.Group] = newClassicGroup(req.Group, c.nowMs())
			return nil
		}
		if req.Version >= 6 {
			// Kafka's TxnOffsetCommitRequest.supportsGroupIdNotFoundError.
			return kerr.GroupIDNotFound
		}
		return kerr.IllegalGeneration
	}
	if g.state == stateDead {
		return kerr.CoordinatorNotAvailable
	}
	if anonymous || (req.Generation < 0 && g.state == stateEmpty) {
		return nil
	}
	if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
		return err
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration
	}
	// Unlike a plain commit, a transactional one is accepted during
	// CompletingRebalance.
	return nil
}

func (c *Coordinator) txnOffsetCommit(r Request, req *kmsg.TxnOffsetCommitRequest) {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	validate, groupErr := c.validateTxnCommit(req)
	if groupErr == nil {
		groupErr = c.checkPartitions(validate, req.Version >= 6, len(req.Topics), func(i int) ([16]byte, string, []partitionMeta) {
			t := req.Topics[i]
			ps := make([]partitionMeta, len(t.Partitions))
			for j, p := range t.Partitions {
				ps[j] = partitionMeta{p.Partition, p.Metadata}
			}
			return t.TopicID, t.Topic, ps
		})
	}
	nowMs := c.nowMs()
	for _, t := range req.Topics {
		rt := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		name, topicErr := c.commitTopic(req.Version >= 6, t.TopicID, t.Topic, groupErr)
		for _, p := range t.Partitions {
			rp := kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition}
			switch {
			case topicErr != nil:
				rp.ErrorCode = topicErr.Code
			case p.Metadata != nil && len(*p.Metadata) > c.cfg.OffsetMetadataMaxBytes:
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				e := offsetEntry{offset: p.Offset, epoch: -1, meta: deref(p.Metadata), commitTs: nowMs, expireTs: -1}
				if req.Version >= 2 {
					e.epoch = p.LeaderEpoch
				}
				c.addPending(req.Group, req.ProducerID, tp{name, p.Partition}, e)
				c.out.Records = append(c.out.Records, Record{
					Partition:     c.Partition(req.Group),
					Key:           EncodeOffsetCommitKey(OffsetCommitKey{req.Group, name, p.Partition}),
					Value:         EncodeOffsetCommitValue(OffsetCommitValue{Offset: e.offset, LeaderEpoch: e.epoch, Metadata: e.meta, CommitTimestamp: e.commitTs, ExpireTimestamp: -1}),
					Transactional: true,
					ProducerID:    req.ProducerID,
					ProducerEpoch: req.ProducerEpoch,
				})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	c.reply(r.ID, resp)
}

// CompleteTransaction applies a commit or abort marker of producerID written
// to __consumer_offsets partition: committed offsets become visible,
// aborted ones are dropped (Kafka's OffsetMetadataManager.replayEndTransactionMarker).
// Replay calls it for control batches read back from the log.
func (c *Coordinator) CompleteTransaction(partition int32, producerID int64, commit bool) {
	for k, m := range c.txnOffsets {
		if k.pid != producerID || c.Partition(k.group) != partition {
			continue
		}
		delete(c.txnOffsets, k)
		if !commit {
			continue
		}
		if !c.groupExists(k.group) {
			c.classic[k.group] = newClassicGroup(k.group, c.nowMs())
		}
		for t, e := range m {
			c.setOffset(k.group, t, e)
		}
	}
}

// ReplayTransactional applies an offset commit record read from a
// transactional batch of producerID: it stays pending until the marker.
func (c *Coordinator) ReplayTransactional(producerID int64, key, value []byte) error {
	k, err := DecodeKey(key)
	if err != nil || (k.Type != RecordOffsetCommit && k.Type != RecordLegacyOffsetCommit) {
		// Only offset commits are written transactionally.
		return c.Replay(key, value)
	}
	if value == nil {
		return nil
	}
	v, err := DecodeOffsetCommitValue(value)
	if err != nil {
		return err
	}
	c.addPending(k.Group, producerID, tp{k.Topic, k.Partition}, offsetEntry{
		offset: v.Offset, epoch: v.LeaderEpoch, meta: v.Metadata, commitTs: v.CommitTimestamp, expireTs: v.ExpireTimestamp,
	})
	return nil
}
