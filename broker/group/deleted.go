package group

import (
	"sort"
	"time"
)

// DeleteTopics drops every group's offsets of the partitions of topics,
// which were deleted from the metadata image, as Kafka's
// GroupCoordinatorShard.onPartitionsDeleted with
// OffsetMetadataManager.onPartitionsDeleted: one offset commit tombstone per
// group and partition with a committed or pending transactional offset, so
// that a topic recreated under the same name starts without offsets, also
// after a restart. Each topic's partitions 0 to Partitions-1 are the deleted
// ones. The tombstones come out of the next Ready.
func (c *Coordinator) DeleteTopics(now time.Time, topics []Topic) {
	c.now = now
	deleted := map[tp]bool{}
	for _, t := range topics {
		for p := int32(0); p < t.Partitions; p++ {
			deleted[tp{t.Name, p}] = true
		}
	}
	c.deleteOffsetsOf(deleted)
}

// deleteOffsetsOf tombstones every group's committed and pending
// transactional offsets of the deleted partitions.
func (c *Coordinator) deleteOffsetsOf(deleted map[tp]bool) {
	if len(deleted) == 0 {
		return
	}
	byGroup := map[string]map[tp]bool{}
	mark := func(group string, t tp) {
		if !deleted[t] {
			return
		}
		if byGroup[group] == nil {
			byGroup[group] = map[tp]bool{}
		}
		byGroup[group][t] = true
	}
	for group, offs := range c.offsets {
		for t := range offs {
			mark(group, t)
		}
	}
	for k, offs := range c.txnOffsets {
		for t := range offs {
			mark(k.group, t)
		}
	}
	for _, group := range sortedKeys(byGroup) {
		for _, t := range sortedTPs(byGroup[group]) {
			c.removeOffset(group, t)
			c.record(group, EncodeOffsetCommitKey(OffsetCommitKey{group, t.topic, t.part}), nil)
		}
	}
}

// DeleteAbsentTopics drops every group's offsets of topics missing from the
// topics last given to SetTopics, as DeleteTopics would have when they were
// deleted. The broker calls it once after loading __consumer_offsets: a
// topic deleted from the metadata just before a crash, before its offsets'
// tombstones were appended, is then found absent at start, and a topic
// recreated under its name does not inherit its offsets. Offsets exist only
// for topics that existed when committed (Kafka's KafkaApis refuses a commit
// to a topic its metadata cache does not hold), so an absent topic was
// deleted. Committed offsets are keyed by topic name, with no topic id, so a
// topic deleted and recreated under the same name before the restart keeps
// its offsets: the name alone cannot tell the two apart.
//
// Kafka does not do this: GroupCoordinatorShard.onLoaded applies the image
// with an empty delta, so a deletion missed before a restart is found by no
// one and its offsets wait for offsets.retention.minutes. Cascade closes
// that window because a topic recreated under the name would otherwise
// start from the old offsets.
func (c *Coordinator) DeleteAbsentTopics(now time.Time) {
	c.now = now
	absent := map[tp]bool{}
	note := func(t tp) {
		if _, ok := c.topics[t.topic]; !ok {
			absent[t] = true
		}
	}
	for _, offs := range c.offsets {
		for t := range offs {
			note(t)
		}
	}
	for _, offs := range c.txnOffsets {
		for t := range offs {
			note(t)
		}
	}
	c.deleteOffsetsOf(absent)
}

// removeOffset applies an offset commit tombstone: the committed offset and
// every pending transactional offset of the group for t go, as Kafka's
// OffsetMetadataManager.replay of a tombstone.
func (c *Coordinator) removeOffset(group string, t tp) {
	c.deleteOffset(group, t)
	for k, offs := range c.txnOffsets {
		if k.group != group {
			continue
		}
		delete(offs, t)
		if len(offs) == 0 {
			delete(c.txnOffsets, k)
		}
	}
}

func sortedTPs(set map[tp]bool) []tp {
	out := make([]tp, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].part < out[j].part
	})
	return out
}
