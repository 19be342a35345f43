// Package broker is the composition root of a Cascade broker: it opens the
// metadata store and the log dirs, keeps this node's partitions in step with
// the metadata image, serves the Kafka protocol on the client listener and,
// when configured, Prometheus metrics and pprof on the admin listener.
//
// A node whose controller.quorum.voters names several voters (or that is
// not combined) is a node of a cluster (cluster.go), composed of the parts
// its process.roles name (cluster_roles.go): a controller part (a voter of
// the quorum, its controller listener, the active controller) and a broker
// part (partitions, handlers, lifecycle, forwarding). A combined node has
// both. A controller-only node (controller_node.go) serves the controller
// listener alone; a broker-only node is no voter and follows the committed
// log as a quorum.Observer over the voters' controller listeners. The
// controller listener (cluster_listener.go) carries the metadata quorum's
// raft frames (api key quorum.APIKey), the metadata fetches of broker-only
// nodes (quorum.ObserverFetchAPIKey) and Kafka requests:
// BrokerRegistration, BrokerHeartbeat and AllocateProducerIds from
// brokers, and the admin requests brokers forward. The metadata log is the quorum's raft log: the raft leader runs
// package controller (cluster_controller.go), proposing one batch at a
// time, and every combined node applies committed batches to two replica
// metadata stores (metadata.NewReplica; a controller-only or broker-only
// node has the one of its part): the broker side's, which drives partitions
// and the client handlers, and the controller listener's, whose writes run
// on the local active controller or answer NOT_CONTROLLER. The broker side
// (cluster_broker.go) registers with the active controller, heartbeats,
// serves the partitions it leads in the image and forwards admin requests.
//
// Forwarding: a broker sends CreateTopics, DeleteTopics, CreatePartitions,
// AlterConfigs and IncrementalAlterConfigs to the active controller's
// listener as the client sent them (same key, version and body) and relays
// the answer, retrying on NOT_CONTROLLER against the leader its quorum
// member (or observer) then knows, for up to 30 s. Kafka wraps them in Envelope (58) to
// carry the client's principal and address for authorisation and quotas;
// Cascade has neither yet, so the envelope would carry nothing the
// controller uses. The controller answers them with the same handler code
// a single node runs, over its replica store. DescribeQuorum,
// ElectLeaders and the partition reassignment APIs are forwarded too and
// answered by the controller's own code (cluster_apis.go, which also serves
// AlterPartition on the controller listener, and cluster_reassign.go); a
// forward no active controller takes in time is answered
// REQUEST_TIMED_OUT (cluster_forward.go). A clean stop is a controlled
// shutdown with a hand-over of the quorum leadership (cluster_shutdown.go).
//
// Replication (cluster_replication.go, broker/replication): partitions
// with more than one replica are replicated as Kafka's ISR replication,
// followers fetching from their leader. The internal topics are placed and
// replicated as any topic, and each coordinator follows the leadership of
// its internal-topic partition (handler/coordinator_leaders.go), answering
// a write once the partition's high watermark passes it
// (handler/coordinator_acks.go), so a fenced broker's groups and
// transactional ids move to the partitions' new leaders. Transaction
// markers and verifications travel between brokers on their client
// listeners (cluster_coordinators.go).
//
// Use:
//
//	cfg, err := config.Load("server.properties", overrides)
//	b, err := broker.Start(ctx, broker.Config{Broker: cfg})
//	fmt.Println(b.Addr())
//	defer b.Close()
package broker
