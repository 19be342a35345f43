// Package faults owns Cascade's fault suites: a seeded schedule of faults
// (proxy toxics from faults/proxy and broker crashes) applied while a
// workload of idempotent producers and consumers records a history, which
// the linearizability checkers then judge.
//
// The workload (Workload) writes the history format of
// linearizability/README.md from three client libraries at once:
//
//   - franz-go idempotent producers, and consumers that issue single Fetch
//     requests (so a fetch's call and return bracket exactly what the broker
//     answered), list the latest offset, commit and read committed offsets;
//   - with -faults.txn, a franz-go transactional producer (two records per
//     transaction, one in ten aborted, each EndTxn recorded as end_txn),
//     read back by the odd-numbered consumers at read_committed;
//   - confluent-kafka-go (librdkafka) idempotent producers, long-lived as an
//     application's, replaced only after a fatal idempotence error;
//   - Apache Kafka's Java client through the matrix's Java driver
//     (matrix/clients/java, one JVM per client, reached with the driver
//     process API): an idempotent producer, one record per command, and a
//     consumer reading each partition from its position.
//
// A produce that times out or loses its connection is recorded as unknown
// (it may have been applied); only a refusal before sending is a failure.
//
// The schedule (Schedule) rotates sets of faults chosen by a seeded
// *rand.Rand (none, one, or two at once, crashes weighted up), and heals
// everything at the end. ProxyFaults lists the proxy's: latency, cut
// connections, lost and delayed Produce answers, Produce answered with
// NOT_LEADER_OR_FOLLOWER, corrupted Fetch batches, lost AddPartitionsToTxn
// and EndTxn answers (the retry lands after the original completed),
// delayed EndTxn answers, a blackhole and refused connections. A Target is
// what the suite runs against: Cascade as a separate process (Process) or Apache
// Kafka as the oracle (Kafka); both are killed with SIGKILL and restarted on
// their data dirs with per-message fsync (log.flush.interval.messages=1), so
// no acknowledged record may be lost.
//
// Run the single-node suite with
//
//	go test ./faults -run SingleNode -v                   # bounded run, both targets (~1.5 min)
//	go test ./faults -run SingleNode -faults.soak=10m     # a soak
//	go test ./faults -run SingleNode -faults.seed=1234    # replay a seed's faults
//	go test ./faults -run SingleNode -faults.kafka=false  # Cascade only
//
// -faults.java=false leaves out the Java clients; -faults.cascade=BIN runs a
// prebuilt broker. -faults.txn adds the transactional producer and
// read_committed consumers. It is off by default because the history
// checker counts exactly one marker per transaction and partition, while
// a broker that crashes between writing a marker and completing the
// transaction writes the marker again on recovery (Kafka's
// ProducerAppendInfo accepts the duplicate, KAFKA-19999), and an Apache
// Kafka restarted after SIGKILL recovers its partitions uncleanly
// (leaderRecoveryState RECOVERING): both yield valid logs the checker
// calls non-linearizable. The Kafka run and the Java clients need java and
// mvn (matrix/apachekafka, matrix/clients/java) and are skipped, saying so,
// without them. The seed is printed; the same seed replays the same fault
// schedule and proxy decisions (timings still vary). A failing run keeps its
// artifacts and prints their directory: history.jsonl, faults.log (faults
// stamped on the history's clock), clients.log, the broker's log, its data
// dir and datadir.txt (a listing), and porcupine.html for the failing
// partition.
package faults
