// Package cascadecontainer starts Cascade's broker image in a container
// through testcontainers-go, for users' own tests, in the style of
// testcontainers' Kafka module: Run starts it and Brokers returns the
// bootstrap address a Kafka client on this machine connects to.
//
//	ctr, err := cascadecontainer.Run(ctx, cascadecontainer.DefaultImage)
//	testcontainers.CleanupContainer(t, ctr)
//	if err != nil {
//		t.Fatal(err)
//	}
//	brokers, err := ctr.Brokers(ctx) // e.g. ["127.0.0.1:40517"]
//
// The image is built from docker/cascade.Dockerfile (ci/docker-setup.sh
// builds it as cascade/cascade:dev). By default the container's listener is
// published on a free port of the engine's loopback and advertised there,
// which works with Docker Desktop too; WithHostNetwork uses the host's
// network instead (Linux engines). WithOverride sets any broker property by
// Apache Kafka's name, as `cascade --override` does.
//
// RunCluster starts a cluster instead: n containers, each a combined
// broker and controller node (process.roles=broker,controller) of one
// static metadata quorum, on the host's network (Linux engines, or Docker
// Desktop with host networking enabled) with two free loopback ports each.
// Kill (docker kill: SIGKILL), Stop (docker stop: SIGTERM, a controlled
// shutdown), Start (the same container, its data and ports), Pause and
// Resume (docker pause, the cgroup freezer) act on one node; Leader,
// WaitISR, Replicas, Controller and MoveLeader find and move leaderships
// through the Kafka protocol (broker/brokertest/clusterctl), and Target
// returns the cluster as a matrix/cluster.Cluster for the matrix's
// cluster suites:
//
//	c, err := cascadecontainer.RunCluster(ctx, 3,
//		cascadecontainer.WithOverride("min.insync.replicas", "2"))
//	defer c.Terminate(ctx)
//	if err != nil {
//		t.Fatal(err)
//	}
//	brokers, err := c.Brokers(ctx) // three 127.0.0.1 addresses
//	// ... create a topic with replication factor 3, produce ...
//	leader, err := c.Leader(ctx, "events", 0)
//	c.Kill(ctx, leader)
//	c.WaitISR(ctx, "events", 0, 2)
//	c.Start(ctx, leader)
//	ctl, err := c.Controller(ctx)
//
// There is no Isolate: on the host's network the containers share one
// network namespace and reach each other over loopback, so no container
// can be cut from its peers while clients still reach it (a packet filter
// on the host's loopback would cut every process of the machine, and
// cannot tell which container a connection comes from). For network
// partitions use broker/brokertest: StartCluster's in-process links, or
// StartProcessCluster with WithNetworkNamespaces.
//
// For a cluster in the test's own process, or of cmd/cascade processes
// without containers, see broker/brokertest.
//
// Without an image registry, testcontainers' reaper (Ryuk) cannot be
// pulled: set TESTCONTAINERS_RYUK_DISABLED=true and remove containers with
// testcontainers.CleanupContainer or Terminate, as above.
package cascadecontainer
