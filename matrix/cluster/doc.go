// Package cluster is what the matrix's multi-node cluster starters share
// and what cluster suites are written against: the Cluster interface, which
// both an Apache Kafka KRaft cluster (apachekafka.StartCluster) and a
// cluster of cmd/cascade processes (cascadecluster.Start) satisfy, so that
// one test body runs against both; per-listener admin connections (Conns)
// that send each request to one named node and never wait on another;
// questions asked of any Cluster over the wire (Metadata, Controller,
// WaitForBrokers); and the small process helpers both starters use (free
// loopback ports, work directories, server.properties files, log tails).
//
//	var c cluster.Cluster = kafkaCluster // or a Cascade cluster
//	id, err := cluster.Controller(ctx, c)
//	if err != nil { ... }
//	c.Kill(id)
//	err = cluster.WaitForBrokers(ctx, c, others...)
//
// Nothing here imports Cascade's broker: every cluster is a black box
// reached over TCP.
package cluster
