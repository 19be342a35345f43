// Package broker is the composition root of a Cascade broker: it opens the
// metadata store and the log dirs, keeps this node's partitions in step with
// the metadata image, serves the Kafka protocol on the client listener and,
// when configured, Prometheus metrics and pprof on the admin listener.
//
// A node whose controller.quorum.voters names several voters is a combined
// broker,controller node of a cluster (cluster.go). Its controller listener
// (cluster_listener.go) carries the metadata quorum's raft frames (api key
// quorum.APIKey) and Kafka requests: BrokerRegistration, BrokerHeartbeat
// and AllocateProducerIds from brokers, and the admin requests brokers
// forward. The metadata log is the quorum's raft log: the raft leader runs
// package controller (cluster_controller.go), proposing one batch at a
// time, and every node applies committed batches to two replica metadata
// stores (metadata.NewReplica): the broker side's, which drives partitions
// and the client handlers, and the controller listener's, whose writes run
// on the local active controller or answer NOT_CONTROLLER. The broker side
// (cluster_broker.go) registers with the active controller, heartbeats,
// serves the partitions it leads in the image and forwards admin requests.
//
// Forwarding: a broker sends CreateTopics, DeleteTopics, CreatePartitions,
// AlterConfigs and IncrementalAlterConfigs to the active controller's
// listener as the client sent them (same key, version and body) and relays
// the answer, retrying on NOT_CONTROLLER against the leader its quorum
// member then knows, for up to 30 s. Kafka wraps them in Envelope (58) to
// carry the client's principal and address for authorisation and quotas;
// Cascade has neither yet, so the envelope would carry nothing the
// controller uses. The controller answers them with the same handler code
// a single node runs, over its replica store.
//
// Replication (cluster_replication.go, broker/replication): partitions
// with more than one replica are replicated as Kafka's ISR replication,
// followers fetching from their leader. The internal topics live on the
// lowest voter with one replica, which is every group and transaction
// coordinator.
//
// Use:
//
//	cfg, err := config.Load("server.properties", overrides)
//	b, err := broker.Start(ctx, broker.Config{Broker: cfg})
//	fmt.Println(b.Addr())
//	defer b.Close()
package broker
