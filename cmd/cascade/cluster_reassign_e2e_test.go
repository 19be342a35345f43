package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// reassign sends one AlterPartitionReassignments through kadm and returns
// the partition's error and message.
func (c *testCluster) reassign(topic string, partition int32, replicas []int32) (error, string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, partition, replicas)
	rs, err := c.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		c.t.Fatalf("AlterPartitionReassignments %s-%d %v: %v", topic, partition, replicas, err)
	}
	r, ok := rs[topic][partition]
	if !ok {
		c.t.Fatalf("AlterPartitionReassignments %s-%d: partition not answered: %+v", topic, partition, rs)
	}
	return r.Err, r.ErrMessage
}

// reassignments lists the reassignments of partition 0 of topics.
func (c *testCluster) reassignments(topics ...string) kadm.ListPartitionReassignmentsResponses {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := kadm.TopicsSet{}
	for _, t := range topics {
		s.Add(t, 0)
	}
	rs, err := c.adm.ListPartitionReassignments(ctx, s)
	if err != nil {
		c.t.Fatalf("ListPartitionReassignments: %v", err)
	}
	return rs
}

// replicasOn returns partition 0 of topic's replicas, ISR and leader as
// node id's Metadata says; leader -1 when unknown.
func (c *testCluster) replicasOn(id int, topic string) (replicas, isr []int32, leader int32) {
	t := c.metadataTopic(id, topic)
	if t == nil || len(t.Partitions) != 1 {
		return nil, nil, -1
	}
	p := t.Partitions[0]
	return p.Replicas, p.ISR, p.Leader
}

// waitReassigned waits until no reassignment of topic is listed and
// every node's Metadata shows replicas want, all in the ISR, led by one
// of them.
func (c *testCluster) waitReassigned(topic string, want []int32) int32 {
	c.t.Helper()
	var leader int32
	waitFor(c.t, 60*time.Second, fmt.Sprintf("%s reassigned to %v", topic, want), func() bool {
		if len(c.reassignments(topic)) != 0 {
			return false
		}
		for id := 1; id <= 3; id++ {
			replicas, isr, l := c.replicasOn(id, topic)
			if !slices.Equal(replicas, want) || len(isr) != len(want) || !slices.Contains(want, l) {
				return false
			}
			leader = l
		}
		return true
	})
	return leader
}

// replicaDir is node id's directory of partition 0 of topic.
func (c *testCluster) replicaDir(id int32, topic string) string {
	return filepath.Join(c.procs[id-1].dir, topic+"-0")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// otherNodes returns the node ids other than id, in order.
func otherNodes(id int32) []int32 {
	return slices.DeleteFunc([]int32{1, 2, 3}, func(n int32) bool { return n == id })
}

// TestClusterReassignPartitions moves partitions between the three nodes
// of a cluster of cmd/cascade processes with franz-go's kadm, as
// kafka-reassign-partitions does: a move of a replica with data to two
// other brokers (listed while one of them is paused, so it cannot catch
// up and the reassignment stays in progress), read back in full from the
// new leader, with the old replica's directory deleted; a cancellation;
// a replication factor change 1 to 3 and back to 1; and Kafka's errors.
func TestClusterReassignPartitions(t *testing.T) {
	c := startTestCluster(t)
	ctx := context.Background()

	const topic = "moved"
	from := c.createTopic(topic, 1)[0]
	var want []string
	for i := range 500 {
		want = append(want, fmt.Sprintf("record-%03d", i))
	}
	for i := 0; i < len(want); i += 50 {
		var recs []*kgo.Record
		for _, v := range want[i : i+50] {
			recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(v)})
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.cl.ProduceSync(pctx, recs...).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	if !exists(c.replicaDir(from, topic)) {
		t.Fatalf("node %d has no directory %s", from, c.replicaDir(from, topic))
	}
	target := otherNodes(from)
	// Pause a target that is not the active controller: it cannot fetch,
	// so the reassignment must still be in progress when listed.
	ctl := c.controller(int(from))
	paused := target[0]
	if paused == ctl {
		paused = target[1]
	}
	if err := c.procs[paused-1].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := c.procs[paused-1].cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer resume()
	if err, msg := c.reassign(topic, 0, target); err != nil {
		t.Fatalf("reassign %s to %v: %v %s", topic, target, err, msg)
	}
	ls := c.reassignments(topic)
	got, ok := ls[topic][0]
	wantReplicas := append(slices.Clone(target), from)
	if !ok || !slices.Equal(got.Replicas, wantReplicas) || !slices.Equal(got.AddingReplicas, target) ||
		!slices.Equal(got.RemovingReplicas, []int32{from}) {
		t.Fatalf("in progress: listed %+v, want replicas %v adding %v removing [%d]", ls, wantReplicas, target, from)
	}
	// A request naming no topics (null) lists every reassignment.
	listed, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(ctx, c.cl)
	if err != nil || listed.ErrorCode != 0 || len(listed.Topics) != 1 || listed.Topics[0].Topic != topic ||
		len(listed.Topics[0].Partitions) != 1 || !slices.Equal(listed.Topics[0].Partitions[0].Replicas, wantReplicas) {
		t.Fatalf("ListPartitionReassignments of every topic: %v %+v", err, listed)
	}
	// Metadata shows the whole replica set while the move is on, as Kafka.
	waitFor(t, 20*time.Second, "Metadata with the reassigning replica set", func() bool {
		replicas, _, leader := c.replicasOn(int(from), topic)
		return slices.Equal(replicas, wantReplicas) && leader == from
	})

	// Kafka's errors, per partition.
	for _, tc := range []struct {
		topic    string
		part     int32
		replicas []int32
		code     *kerr.Error
		msg      string
	}{
		{"nope", 0, []int32{1}, kerr.UnknownTopicOrPartition, "Unable to find a topic named nope."},
		{topic, 5, []int32{1}, kerr.UnknownTopicOrPartition, "Unable to find partition moved:5."},
		{topic, 0, []int32{1, 9}, kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker 9, but no such broker is registered."},
		{topic, 0, []int32{1, 1}, kerr.InvalidReplicaAssignment, "The manual partition assignment includes the broker 1 more than once."},
		{"nope", 0, nil, kerr.UnknownTopicOrPartition, "Unable to find a topic named nope."},
	} {
		err, msg := c.reassign(tc.topic, tc.part, tc.replicas)
		if !errors.Is(err, tc.code) || msg != tc.msg {
			t.Errorf("reassign %s-%d %v: %v %q, want %v %q", tc.topic, tc.part, tc.replicas, err, msg, tc.code, tc.msg)
		}
	}

	resume()
	leader := c.waitReassigned(topic, target)
	if got := readAll(t, c.seeds[leader-1], topic); !slices.Equal(got, want) {
		t.Fatalf("read %d records from the new leader %d, want %d in order", len(got), leader, len(want))
	}
	waitFor(t, 30*time.Second, fmt.Sprintf("node %d's replica directory deleted", from), func() bool {
		return !exists(c.replicaDir(from, topic))
	})
	for _, id := range target {
		if !exists(c.replicaDir(id, topic)) {
			t.Errorf("node %d has no directory for its new replica", id)
		}
	}

	// Cancelling with nothing in progress, then a reassignment cancelled
	// while its new replica is paused: the original assignment is back.
	if err, _ := c.reassign(topic, 0, nil); !errors.Is(err, kerr.NoReassignmentInProgress) {
		t.Fatalf("cancel with nothing in progress: %v", err)
	}
	const cancelled = "cancelled"
	home := c.createTopic(cancelled, 1)[0]
	produceEach(t, ctx, c.cl, cancelled, "kept", []int32{0})
	extra := otherNodes(home)[0]
	if extra == c.controller(int(home)) {
		extra = otherNodes(home)[1]
	}
	if err := c.procs[extra-1].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused, resumed = extra, false
	if err, msg := c.reassign(cancelled, 0, []int32{home, extra}); err != nil {
		t.Fatalf("reassign %s: %v %s", cancelled, err, msg)
	}
	if ls := c.reassignments(cancelled); len(ls[cancelled]) != 1 {
		t.Fatalf("%s not listed as in progress: %+v", cancelled, ls)
	}
	if err, msg := c.reassign(cancelled, 0, nil); err != nil {
		t.Fatalf("cancel %s: %v %s", cancelled, err, msg)
	}
	resume()
	if leader := c.waitReassigned(cancelled, []int32{home}); leader != home {
		t.Fatalf("%s led by %d after the cancellation, want %d", cancelled, leader, home)
	}
	if got := readAll(t, c.seeds[home-1], cancelled); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("%s after the cancellation: %q", cancelled, got)
	}
	waitFor(t, 30*time.Second, fmt.Sprintf("no replica of %s on node %d", cancelled, extra), func() bool {
		return !exists(c.replicaDir(extra, cancelled))
	})

	// A replication factor change: 1 to 3, then 3 to 1 on another broker.
	const grown = "grown"
	first := c.createTopic(grown, 1)[0]
	produceEach(t, ctx, c.cl, grown, "before", []int32{0})
	all := append([]int32{first}, otherNodes(first)...)
	if err, msg := c.reassign(grown, 0, all); err != nil {
		t.Fatalf("reassign %s to %v: %v %s", grown, all, err, msg)
	}
	c.waitReassigned(grown, all)
	produceEach(t, ctx, c.cl, grown, "grown", []int32{0})
	last := otherNodes(first)[1]
	if err, msg := c.reassign(grown, 0, []int32{last}); err != nil {
		t.Fatalf("reassign %s to [%d]: %v %s", grown, last, err, msg)
	}
	if leader := c.waitReassigned(grown, []int32{last}); leader != last {
		t.Fatalf("%s led by %d, want %d", grown, leader, last)
	}
	// The follower left alone leads, its whole log committed at once.
	if got := readAll(t, c.seeds[last-1], grown); !slices.Equal(got, []string{"before", "grown"}) {
		t.Fatalf("%s read back %q from its only replica", grown, got)
	}
	produceEach(t, ctx, c.cl, grown, "shrunk", []int32{0})
	if got := readAll(t, c.seeds[last-1], grown); !slices.Equal(got, []string{"before", "grown", "shrunk"}) {
		t.Fatalf("%s read back %q", grown, got)
	}
	for _, id := range otherNodes(last) {
		waitFor(t, 30*time.Second, fmt.Sprintf("node %d's replica of %s deleted", id, grown), func() bool {
			return !exists(c.replicaDir(id, grown))
		})
	}
}
