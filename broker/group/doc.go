// Package group is Cascade's group coordinator: the classic consumer group
// protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, static membership of
// KIP-345), the KIP-848 consumer group protocol (ConsumerGroupHeartbeat with
// server-side "uniform" and "range" assignors), committed offsets, and the
// admin APIs over groups, with Apache Kafka 4.x's GroupMetadataManager and
// OffsetMetadataManager as the specification.
//
// It is a state machine in the etcd-raft style: no goroutines, clock, disk or
// network inside. The caller feeds requests with Step and the passage of time
// with Tick, then drains Ready: records to append to the __consumer_offsets
// partitions, in Apache Kafka's exact key/value schemas (records.go), and the
// replies to send once those records are appended. A JoinGroup's reply may
// come out of a later Ready, when its rebalance completes. At load the caller
// replays each partition's records with Replay, so offsets and groups survive
// a restart.
//
// The classic and consumer protocols meet in online migration (KIP-848,
// group.consumer.migration.policy, migration.go): a consumer protocol member
// joining a classic group upgrades it, classic members of a consumer group
// are served by its state machine, and the group downgrades when its last
// consumer protocol member leaves or is replaced by a classic static member
// with its group.instance.id. DeleteTopics tombstones every group's offsets
// of deleted topics (deleted.go), as Kafka does on topic deletion;
// DeleteAbsentTopics, called once after a load, does the same for committed
// topics missing from the metadata, deleted before a crash let their
// tombstones be written.
//
// Offset commits (offsets.go, txn.go) are validated as Kafka 4.4's
// OffsetMetadataManager and ConsumerGroup.validateOffsetCommit: a consumer
// group member keeps, for each partition it owns, the epoch it was
// assigned at (persisted in the AssignmentEpochs tagged field of its
// current assignment record), and a commit with an older member epoch
// lands only when every partition of it was assigned at or before that
// epoch.
//
// A member's SubscribedTopicRegex is resolved as Kafka 4.4's group
// coordinator resolves it (regex.go): in a task that runs on the Tick after
// the heartbeat that asked for it, against every topic the member may
// describe (Request.CanDescribe), internal topics included, with the
// result kept as a ConsumerGroupRegularExpression record; a group is
// resolved again when it has an unresolved regex or topics were created
// since, at most once every 10 s.
//
// Requests and responses are franz-go kmsg messages: the coordinator speaks
// the protocol itself, so Kafka error codes are produced here rather than at
// the handler edge.
//
// Use:
//
//	c := group.New(group.DefaultConfig())
//	c.SetTopics(topics)
//	for _, rec := range partitionRecords { _ = c.Replay(rec.Key, rec.Value) }
//	c.LoadComplete(now)
//	_ = c.Step(now, group.Request{ID: 1, ClientID: "cli", Msg: joinReq})
//	c.Tick(now)
//	rd := c.Ready() // append rd.Records, then send rd.Replies
package group
