// Package apachekafka provisions Apache Kafka 4.x as the oracle that Cascade
// is compared against, and runs it as a child process.
//
// It owns four things: resolving the pinned Kafka jars from Maven Central
// into a shared cache (Ensure), running Kafka's own command-line tools from
// those jars (Dist.Run, Dist.DumpLog), starting a single-node combined
// KRaft broker on free loopback ports (Dist.StartBroker), which Broker.Kill
// crashes with SIGKILL and Broker.Restart brings back on the same directory
// and ports, so fault suites can crash the oracle too, and starting a
// multi-node KRaft cluster (StartCluster: three combined nodes by default,
// or three controllers and N brokers) whose nodes Cluster.Kill, Stop, Pause,
// Resume and Restart one by one, with the questions cluster suites ask of
// it answered over the wire (Cluster.ActiveController through
// DescribeQuorum, Cluster.Partition, WaitForLeaderChange, WaitForISR,
// WaitForNodeInISRs, WaitForBrokers). Nothing here
// imports Cascade's broker: the matrix, the fault suite and the storage tests
// all treat Apache Kafka as a black box reached over TCP or through its tools.
//
// The cache lives in $CASCADE_CACHE_DIR (default os.UserCacheDir()/cascade)
// under apache-kafka/<version>/, is guarded by a file lock so that parallel
// test binaries resolve it once, and needs `mvn` and a Java 17+ runtime.
//
//	dist, err := apachekafka.Ensure(ctx)
//	if err != nil { ... }
//	b, err := dist.StartBroker(ctx, apachekafka.BrokerOptions{})
//	if err != nil { ... }
//	defer b.Stop()
//	client, _ := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
//
//	c, err := apachekafka.StartCluster(ctx, apachekafka.ClusterOptions{Nodes: 3})
//	if err != nil { ... }
//	defer c.Close()
//	q, _ := c.ActiveController(ctx)
//	c.Kill(q.LeaderID)
//	q, err = c.WaitForControllerChange(ctx, q.LeaderID)
//
// ci/apache-kafka.sh does the same by hand for people who want a broker (or,
// with --cluster N, a cluster) in a terminal.
package apachekafka
