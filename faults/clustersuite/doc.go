// Package clustersuite holds the cluster fault suites: the fault suite of
// package faults run against a three-node Apache Kafka KRaft cluster and
// a three-node Cascade cluster, every node in a network namespace of its
// own (faults/netns), with a schedule that applies every failure mode of
// Kafka's replication test (clean and hard shutdown, clean and hard
// bounce, pause) to every role (partition leader, follower, active
// controller, group coordinator, transaction coordinator), network
// partitions of a leader, a follower and the controller, the clients cut
// from a leader, and a hard bounce of every node at once. It is a package
// of its own so that its run has its own go test time limit.
//
//	go test ./faults/clustersuite -v                      # CI's run: every mode and every role at least once
//	go test ./faults/clustersuite -v -faults.full         # every mode for every role
//	go test ./faults/clustersuite -faults.seed=1234       # replay a seed
//	go test ./faults/clustersuite -faults.update          # rewrite the table in faults/README.md
//
// It needs root (network namespaces); elsewhere it is skipped.
package clustersuite
