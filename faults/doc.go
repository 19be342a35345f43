// Package faults owns Cascade's fault suites: a seeded schedule of faults
// (proxy toxics from faults/proxy and broker crashes) applied while a
// workload of idempotent producers and consumers records a history, which
// the linearizability checkers then judge.
//
// The workload (Workload) uses franz-go and writes the history format of
// linearizability/README.md: every produce, every fetch (issued as a single
// Fetch request so its call and return bracket exactly what the broker
// answered), list_offsets, commits and committed-offset reads. The schedule
// (Schedule) rotates faults chosen by a seeded *rand.Rand, including none,
// and heals everything at the end. A Target is what the suite runs against:
// Cascade as a separate process (so it can be killed with SIGKILL and
// restarted on its data dir) or Apache Kafka as the oracle.
//
// Run the single-node suite with
//
//	go test ./faults -run SingleNode -v                       # bounded CI run
//	go test ./faults -run SingleNode -faults.duration=10m     # a soak
//	go test ./faults -run SingleNode -faults.seed=1234        # replay a seed
//
// The seed is printed; a failing run keeps its artifacts (history, broker
// log, porcupine HTML) and prints their directory.
package faults
