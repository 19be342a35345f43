// Package matrix is the client compatibility matrix: the same
// scenario catalogue run through every selected Kafka client against every
// selected target (an embedded Cascade, Apache Kafka provisioned by
// matrix/apachekafka, three-node clusters of either from
// matrix/apachekafka and matrix/cascadecluster, or an external cluster),
// producing a report of cells and a history of every data-path command.
//
// The package owns the targets (target.go), the runner and cell model
// (matrix.go), the scenarios (scenario_*.go), the reports (report.go) and
// the history recorder (history.go). Client libraries sit behind
// matrix/driver; each in-process Go driver is a subpackage that registers
// itself, and out-of-process drivers speak the JSON protocol documented in
// matrix/README.md. The version negotiation cell (scenario_versions.go)
// puts faults/proxy between a client and the target, with a toxic that
// records request versions and changes nothing; the lost-answer cell
// (scenario_retries.go) uses a toxic that loses the first Produce answer.
// Cells needing a static broker setting the main instance must not have
// (auto-creation on) run on the target's variant
// instance (VariantOverrides, Env.Variant, scenario_variant.go).
// On the cluster targets (IsClusterTarget) the Env holds the cluster
// (Env.Cluster), topics have three replicas, and the cluster scenarios
// (ClusterFaultScenarios, scenario_nodestop.go, scenario_followerfetch.go)
// stop and start its nodes; the default run there is
// ClusterDefaultScenarios (catalogue_cluster.go).
//
// `go test ./matrix/...` runs it; MATRIX_TARGETS, MATRIX_CLIENTS and
// MATRIX_REPORT_DIR select targets, clients and where the report goes. The
// test fails when a cell fails on an oracle (Apache Kafka, or the Apache
// Kafka cluster: the scenario or driver is wrong) or when a cell that
// passes on a target's oracle (OracleOf) fails on the target (that target
// is incompatible).
package matrix
