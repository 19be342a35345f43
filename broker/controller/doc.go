// Package controller is the active controller of a KRaft-style Cascade
// cluster, as a pure state machine: each operation takes the latest
// metadata image (including every batch this controller has proposed),
// the request, and where time matters an injected now and the offset the
// proposed batch will have; it returns the records to propose as one batch
// and the reply. It has no goroutines, network, files or clock; the caller
// (the quorum's leader loop) proposes the records through Raft, applies
// them to its image with metadata.Apply, and answers the request once the
// batch commits.
//
// It owns broker registration (epochs, incarnations, features), heartbeats
// and fencing (session timeout, BrokerGone, controlled shutdown), leader
// election from the ISR with Kafka's PartitionChangeBuilder rules
// (eligible leader replicas, KIP-966, on as in Kafka 4.1 and later, with a
// new incarnation that cannot name its previous epoch taken out of every
// ELR; unclean election only when allowed),
// AlterPartition's epoch checks, ElectLeaders, partition reassignment
// (KIP-455, as ReplicationControlManager: adding and removing replicas in
// the change records, completed by the change whose ISR holds the target),
// preferred-leader rebalancing, topic creation and deletion with rack-aware placement
// (planned by metadata.Planner, shared with the single-node Store), and
// producer id blocks.
//
// Failures are *metadata.Error values whose Kind is a sentinel of this
// package (ErrStaleBrokerEpoch, ...) or of package metadata for topic
// operations; the handler edge maps kinds to Kafka error codes. Any other
// error is a bug or a caller error and means nothing was planned.
//
// Use:
//
//	c, err := controller.New(controller.DefaultConfig(1, rand.New(rand.NewSource(seed))))
//	recs, reply, err := c.RegisterBroker(img, now, img.Offset+1, controller.RegisterBrokerRequest{...})
//	// propose recs; on commit img, _ = metadata.Apply(img, recs); answer reply
//	recs, tick, err := c.Tick(img, now) // every broker.heartbeat.interval or so
package controller
