package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterUncleanElectionRecovery is leader recovery after an unclean
// election (KIP-704) across processes. A partition with two replicas
// loses its follower from the ISR (paused), takes records on the leader
// alone, then the leader dies: the partition has no leader until unclean
// election is enabled on the topic by IncrementalAlterConfigs, when the
// controller elects the out-of-sync replica with an ISR of itself alone and
// the partition RECOVERING. As Kafka's Partition.makeLeader, the new leader
// counts it recovered at once and says RECOVERED in its next
// AlterPartition: the old leader, restarted, truncates what only it had,
// catches up and joins the ISR, and the controller's change (RECOVERED,
// ISR of two) reaches the follower's image. Producing works throughout;
// the records only the dead leader had are lost, as Kafka loses them.
// Apache Kafka 4.4 in the same scenario writes the same change records
// (matrix/apachekafka's test of the same name): RECOVERING with the
// unclean election, RECOVERED in the record of the ISR expansion.
func TestClusterUncleanElectionRecovery(t *testing.T) {
	c := startTestCluster(t, append(fastReplication, "unclean.leader.election.interval.ms=1000")...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const topic = "recover"
	if _, err := c.adm.CreateTopic(ctx, 1, 2, map[string]*string{"min.insync.replicas": kmsg.StringPtr("1")}, topic); err != nil {
		t.Fatalf("CreateTopic RF=2: %v", err)
	}
	var replicas []int32
	waitFor(t, 30*time.Second, "two replicas in the ISR", func() bool {
		mt := c.metadataTopic(1, topic)
		if mt == nil || len(mt.Partitions) != 1 || len(mt.Partitions[0].ISR) != 2 || mt.Partitions[0].Leader < 0 {
			return false
		}
		replicas = mt.Partitions[0].Replicas
		return true
	})
	old, _ := c.partitionOn(1, topic)
	follower := replicas[0]
	if follower == old {
		follower = replicas[1]
	}
	third := 6 - old - follower // neither replica: it keeps the quorum
	t.Logf("leader %d, follower %d, third node %d", old, follower, third)
	produce := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			produceEach(t, ctx, c.cl, topic, prefix+strconv.Itoa(i), []int32{0})
		}
	}
	produce("before-", 5)

	// The follower pauses: fenced and out of the ISR, the leader alone
	// commits records the follower never fetches.
	c.procs[follower-1].cmd.Process.Signal(syscall.SIGSTOP)
	waitFor(t, 60*time.Second, "the paused follower out of the ISR", func() bool {
		l, isr := c.partitionOn(int(third), topic)
		return l == old && slices.Equal(isr, []int32{old})
	})
	produce("lost-", 3)

	// The leader dies, the follower resumes: the ISR's only member is
	// gone, so there is no leader while unclean election is off.
	c.procs[old-1].kill()
	c.procs[follower-1].cmd.Process.Signal(syscall.SIGCONT)
	waitFor(t, 60*time.Second, "the follower back and the dead leader fenced", func() bool {
		live := c.liveOn(int(third))
		return live[follower] && !live[old]
	})
	// The ISR keeps its last member, or (eligible leader replicas)
	// empties with it in the ELR.
	if l, isr := c.partitionOn(int(third), topic); l >= 0 || len(isr) > 1 || (len(isr) == 1 && isr[0] != old) {
		t.Fatalf("leader %d, ISR %v with the ISR's only member dead and unclean election off", l, isr)
	}
	set := kadm.AlterConfig{Name: "unclean.leader.election.enable", Value: kmsg.StringPtr("true")}
	ac, err := c.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{set}, topic)
	if err == nil {
		_, err = ac.On(topic, nil)
	}
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs unclean.leader.election.enable=true: %v", err)
	}
	waitFor(t, 60*time.Second, "the follower elected uncleanly", func() bool {
		l, isr := c.partitionOn(int(third), topic)
		return l == follower && slices.Equal(isr, []int32{follower})
	})
	waitFor(t, 30*time.Second, "the new leader marking the partition recovered", func() bool {
		return strings.Contains(c.logs[follower-1].String(), "marking it recovered")
	})
	produce("after-", 5)

	// The old leader comes back as a follower: it truncates the records
	// only it had, catches up and joins the ISR with the AlterPartition
	// that says RECOVERED.
	c.procs[old-1].start(t, c.bin, c.logs[old-1])
	waitFor(t, 60*time.Second, "the old leader back in the ISR", func() bool {
		_, isr := c.partitionOn(int(third), topic)
		return len(isr) == 2
	})
	waitFor(t, 30*time.Second, "the controller's RECOVERED in the old leader's image", func() bool {
		return strings.Contains(c.logs[old-1].String(), "leader_recovery_state=recovered")
	})
	oldLog := c.logs[old-1].String()
	if !strings.Contains(oldLog, "leader_recovery_state=recovering") {
		t.Fatalf("node %d never saw the partition RECOVERING", old)
	}
	if !strings.Contains(c.logs[follower-1].String(), "leader_recovery_state=recovered") {
		t.Fatalf("node %d's ISR expansion was not answered RECOVERED", follower)
	}
	if !strings.Contains(oldLog, "follower truncated") {
		t.Fatalf("node %d, restarted with records only it had, did not truncate", old)
	}
	produce("later-", 3)

	// What the follower never had is gone; every other acknowledged
	// record is there once, in order.
	var want []string
	for _, p := range []struct {
		prefix string
		n      int
	}{{"before-", 5}, {"after-", 5}, {"later-", 3}} {
		for i := range p.n {
			want = append(want, p.prefix+strconv.Itoa(i))
		}
	}
	if got := readAll(t, c.seeds[follower-1], topic); !slices.Equal(got, want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}
