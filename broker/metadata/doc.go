// Package metadata owns the cluster metadata: the records that describe
// topics, partitions, configs, producer-id blocks and features; the
// immutable Image they replay into; and the Store that makes records
// durable in a local metadata log and publishes each new image.
//
// Records mirror Kafka's __cluster_metadata records (TopicRecord,
// PartitionRecord, ConfigRecord, RemoveTopicRecord, ProducerIdsRecord,
// FeatureLevelRecord, and for a cluster RegisterBrokerRecord,
// UnregisterBrokerRecord, BrokerRegistrationChangeRecord and
// PartitionChangeRecord; AccessControlEntryRecord and
// RemoveAccessControlEntryRecord for ACLs, which the image keeps indexed
// for the authorizer as an acl.Index) plus Cascade's ClusterIDRecord, each typed by
// Kafka's MetadataRecordType number. Apply(img, records) is pure (no I/O,
// clock or randomness), so a Raft log carrying the same records rebuilds
// the same images; the image keeps broker registrations (Broker, Brokers)
// and merges partition changes with Kafka's epoch rules.
//
// Planner turns topic operations (create with rack-aware placement,
// create partitions, delete, config changes) into records, validated
// against an image and a Cluster view. The single-node Store plans on
// SingleNode and commits to its journal; package controller plans on the
// image's Registrations and proposes to the quorum: one implementation of
// Kafka's rules for both.
//
// In a cluster the store is a replica (NewReplica): it has no journal;
// the metadata quorum feeds it every committed batch (ApplyCommitted, and
// RestoreSnapshot for a raft snapshot), in log order, with the batch's raft
// index as the image's Offset; its writes go to a Writer, which carries
// them to the active controller. Proposing and applying are separate: the
// controller proposes, and every replica, its own included, applies.
//
// Durability: one operation is one batch; the batch is encoded
// (EncodeBatch) and appended to the Journal, which fsyncs before the store
// publishes the new image and calls subscribers. The local journal
// (package journal) is a length+CRC-32C framed append-only file in
// <log.dirs[0]>/__cluster_metadata-0/ with torn-tail truncation on open; it
// does not use the partition segment format because a metadata log is tiny
// and must be readable before any partition log is opened. When the history
// is long compared with the image, Open rewrites it as one snapshot batch.
//
// Use:
//
//	st, err := metadata.Open(filepath.Join(cfg.LogDirs[0], metadata.DirName), metadata.Options{Broker: cfg})
//	cancel := st.Subscribe(func(prev, next *metadata.Image) { /* sync partitions to next */ })
//	res := st.CreateTopics([]metadata.CreateTopic{{Name: "t", NumPartitions: 3, ReplicationFactor: 1}}, false)
//	t, err := st.EnsureTopic("auto")      // auto-create with num.partitions
//	pid, err := st.NextProducerID()       // InitProducerId
//	img := st.Image(); t, ok := img.Topic("t")
//
// Operation errors are *Error values whose Kind is a sentinel naming the
// Kafka error code (ErrTopicExists, ErrInvalidPartitions, ...) and whose
// message is Kafka's wording. The package does no network I/O and its
// image logic no I/O at all; only Open touches the filesystem, through
// package journal.
package metadata
