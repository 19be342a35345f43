// Package partition owns one replica of a topic-partition on this broker and
// the Manager that maps topic-partitions and topic ids to replicas.
//
// A Partition wraps a log (broker/log) with the state Kafka keeps beside it in
// its Partition and UnifiedLog classes: the leader epoch, the high watermark,
// the last stable offset, and the fetch waiters that long-polling fetches
// park on. On a single node the high watermark advances to the log end offset
// after every append; with replication it is to advance from the followers'
// log end offsets instead, without reshaping the type.
//
// Use:
//
//	p := partition.New(tp, topicID, epoch, lg)
//	info, err := p.Append(records)
//	ch := p.Changed() // closed by the next append
//	res, err := p.Read(offset, maxBytes, partition.ReadHighWatermark, true)
package partition
