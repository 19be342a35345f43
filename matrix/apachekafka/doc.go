// Package apachekafka provisions Apache Kafka 4.x as the oracle that Cascade
// is compared against, and runs it as a child process.
//
// It owns three things: resolving the pinned Kafka jars from Maven Central
// into a shared cache (Ensure), running Kafka's own command-line tools from
// those jars (Dist.Run, Dist.DumpLog), and starting a single-node combined
// KRaft broker on free loopback ports (Dist.StartBroker), which Broker.Kill
// crashes with SIGKILL and Broker.Restart brings back on the same directory
// and ports, so fault suites can crash the oracle too. Nothing here
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
// ci/apache-kafka.sh does the same by hand for people who want a broker in a
// terminal.
package apachekafka
