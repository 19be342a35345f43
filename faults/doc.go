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
//   - franz-go transactional producers (two records per transaction, one
//     in ten aborted, each EndTxn recorded as end_txn), read back by the
//     odd-numbered consumers at read_committed. They also make the
//     coordinator abort on its own: one producer leaves a transaction in
//     ten open and is replaced (the new InitProducerId bumps the epoch and
//     aborts it, KIP-360); the other runs with a 1.5 s
//     transaction.timeout.ms and stalls one transaction in six past it;
//   - confluent-kafka-go (librdkafka) idempotent producers, long-lived as an
//     application's, replaced only after a fatal idempotence error;
//   - Apache Kafka's Java client through the matrix's Java driver
//     (matrix/clients/java, one JVM per client, reached with the driver
//     process API): an idempotent producer, one record per command, and a
//     consumer reading each partition from its position;
//   - two franz-go group consumers subscribed in one group with the eager
//     range balancer, one of which leaves and joins again every few
//     seconds; each generation's assignment (member id and generation
//     from Client.GroupMetadata in the OnPartitionsAssigned hook) is
//     recorded as an assignment op, for the double_owner check.
//
// A produce that times out or loses its connection is recorded as unknown
// (it may have been applied); only a refusal before sending is a failure.
//
// The schedule (Schedule) rotates sets of faults chosen by a seeded
// *rand.Rand (none, one, or two at once, crashes weighted up), and heals
// everything at the end. Besides the proxy's faults there are two process
// faults on either target: kill-9 (CrashFault: SIGKILL and restart) and
// pause (PauseFault: SIGSTOP for a seeded 0.5-3 s, then SIGCONT, as
// Jepsen's pause nemesis), during which clients see timeouts and unknown
// outcomes with their connections open.
//
// After the final heal the workload runs on until every client has
// succeeded again, for at most livenessBound (20 s); then Liveness
// measures the run (HARNESS "History checks" 6) and writes liveness.md
// into the run directory and the test log: for every moment all faults
// were healed, the time until each client kind's first acknowledged
// produce and first successful fetch; each client's longest stretch
// without a successful operation; each consumer's lag at the end
// (acknowledged writes at or past its position; the drain must have
// none); and each client's recovery after the final heal. A client with
// no success within the bound after the final heal fails the run as
// stuck. ProxyFaults lists the proxy's: latency, cut
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
//	go test ./faults -run SingleNode -faults.txn=false    # without transactions
//
// The cluster suites (faults/clustersuite) run the same Suite on three-node
// clusters whose nodes sit in network namespaces (faults/netns), with the
// faults of ClusterFaults aimed at whoever holds a role (ClusterTarget),
// a Monitor of leaders, ISRs and the controller, and the faults × targets
// table of ClusterMarkdown; faults/README.md describes them.
//
// -faults.java=false leaves out the Java clients; -faults.cascade=BIN runs a
// prebuilt broker; -faults.txn=false leaves out the transactional
// producers and read_committed consumers. Both targets run with
// transaction.abort.timed.out.transaction.cleanup.interval.ms=500, so a
// timed-out transaction is aborted soon. The checker
// (linearizability/txn.go) accepts what Apache Kafka does around
// transactions under these faults: markers written more than once (a
// coordinator that recovers a transaction in PrepareCommit or
// PrepareAbort writes its markers again, and the partition accepts the
// copy, KAFKA-19999), and aborts the client never asked for.
//
// Apache Kafka 4.4.0 itself fails the transactional checks now and then
// after a kill-9: on restart its transaction coordinator aborts a
// timed-out transaction before the controller has given the topic's
// partitions a leader again, finds no leader, logs at INFO "Couldn't find
// leader endpoint for partitions Set(…) while trying to send transaction
// markers for <transactional.id>, these partitions are likely deleted
// already and hence can be skipped" (TransactionMarkerChannelManager),
// and completes the abort (PrepareAbort, then CompleteAbort) without
// markers; the transaction's records stay open until the producer's next
// marker, usually a commit, exposes them (aborted_read, mixed_outcome).
// For the Apache Kafka target only, the suite matches each such anomaly
// with the broker's log (ExplainSkippedMarkers, kafkadefect.go): it is
// Kafka's defect when its transaction has no acknowledged commit and a
// skipped-marker line names the transaction's transactional.id and the
// partition where its records read as committed, names no partition the
// transaction did not address, and is stamped between the transaction's
// first produce there and the first acknowledged produce of the
// transactional.id's next transaction (the run ties the log's wall clock
// to the history's with a ClockAnchor; a line explains one transaction).
// The line carries no producer id, epoch or transaction, so this is as
// precise as the log allows. Such anomalies are listed with their log line
// in the test log and in findings.md as "APACHE KAFKA DEFECT REPRODUCED",
// and the run keeps its artifacts; any anomaly not so explained, or
// dropped past the report's cap, fails the run, and Cascade's run gets no
// allowance. A failing run prints the broker's skipped-marker lines next
// to the anomaly.
//
// The Kafka run and the Java clients need java and mvn
// (matrix/apachekafka, matrix/clients/java) and are skipped, saying so,
// without them. The seed is printed; the same seed replays the same fault
// schedule and proxy decisions (timings still vary). A failing run keeps its
// artifacts and prints their directory: history.jsonl, faults.log (faults
// stamped on the history's clock), clients.log, the broker's log, its data
// dir and datadir.txt (a listing), porcupine.html for the failing
// partition, liveness.md, and for the Kafka run findings.md.
package faults
