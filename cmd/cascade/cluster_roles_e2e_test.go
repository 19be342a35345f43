package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterSplitRoles runs the shape of a production Kafka 4.x KRaft
// cluster as separate cmd/cascade processes: three process.roles=controller
// voters (controller listener only) and two process.roles=broker nodes that
// follow the metadata log as observers. Through franz-go it checks that
// Metadata lists exactly the two brokers (and names one of them as
// controller, as Kafka's brokers do) while exactly one voter is the active
// controller, that an RF=1 topic spread over both brokers produces and
// consumes, that a killed broker is fenced, and that restarted after the
// controllers snapshotted (metadata.log.max.record.bytes.between.snapshots
// =1024) and compacted their log it catches up from the snapshot, knows the
// topics created while it was down and serves its partitions again; then
// that after SIGKILL of the active controller another is elected,
// CreateTopics through a broker works again and both brokers still serve.
func TestClusterSplitRoles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/cascade and starts five processes")
	}
	const nCtl, nBrokers = 3, 2
	// Short lease timings so fencing fits the test's minute.
	common := []string{
		"controller.listener.names=CONTROLLER",
		"broker.heartbeat.interval.ms=500",
		"broker.session.timeout.ms=4000",
		// Two brokers: Kafka's default factor of 3 could never be
		// placed, and FindCoordinator would answer
		// COORDINATOR_NOT_AVAILABLE for ever.
		"offsets.topic.replication.factor=2",
	}
	sc := startSplitCluster(t, nCtl, nBrokers, common, func(port int) []string {
		// As Kafka's config/kraft/controller.properties.
		return []string{"process.roles=controller", fmt.Sprintf("listeners=CONTROLLER://127.0.0.1:%d", port),
			"metadata.log.max.record.bytes.between.snapshots=1024"}
	}, func(addr string) []string {
		return []string{"process.roles=broker", "listeners=PLAINTEXT://" + addr,
			"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"}
	})
	bin, ctlPorts, procs, logs, seeds := sc.bin, sc.ctlPorts, sc.procs, sc.logs, sc.seeds
	began := time.Now()

	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequestTimeoutOverhead(5*time.Second), kgo.RetryTimeout(20*time.Second),
		kgo.MetadataMinAge(50*time.Millisecond), kgo.MetadataMaxAge(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// metadataOn asks broker id for Metadata of topics (nil: none), so a
	// stopped broker does not hold up the poll.
	metadataOn := func(id int, topics ...string) *kmsg.MetadataResponse {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		req := kmsg.NewPtrMetadataRequest()
		for _, name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		m, err := req.RequestWith(c, cl.Broker(id))
		if err != nil {
			return nil
		}
		return m
	}
	brokersOn := func(id int) []int32 {
		m := metadataOn(id)
		if m == nil {
			return nil
		}
		var ids []int32
		for _, b := range m.Brokers {
			ids = append(ids, b.NodeID)
		}
		slices.Sort(ids)
		return ids
	}
	controllerOn := func(id int) int32 { // Metadata's controller id

		if m := metadataOn(id); m != nil {
			return m.ControllerID
		}
		return -1
	}
	both := []int32{4, 5}
	formed := waitFor(t, 40*time.Second, "Metadata listing exactly brokers 4 and 5 on both", func() bool {
		// Through the seeds first: the client learns the brokers' ids.
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if m, err := adm.BrokerMetadata(c); err != nil || len(m.Brokers) != 2 {
			return false
		}
		return slices.Equal(brokersOn(4), both) && slices.Equal(brokersOn(5), both)
	})
	// As Kafka's KRaftMetadataCache, Metadata names a live broker as
	// controller: clients cannot reach the controllers (KIP-590).
	if a, b := controllerOn(4), controllerOn(5); !slices.Contains(both, a) || !slices.Contains(both, b) {
		t.Fatalf("Metadata names controllers %d and %d, want live brokers", a, b)
	}
	// activeVoter asks each running voter's controller listener for a
	// validate-only CreateTopics: the inactive ones answer NOT_CONTROLLER.
	// It returns the one voter that does not, or -1.
	activeVoter := func() int32 {
		active := int32(-1)
		for id := 1; id <= nCtl; id++ {
			if procs[id].cmd == nil {
				continue
			}
			vc, err := kgo.NewClient(kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", ctlPorts[id])))
			if err != nil {
				t.Fatal(err)
			}
			req := kmsg.NewPtrCreateTopicsRequest()
			req.TimeoutMillis, req.ValidateOnly = 5000, true
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "probe", 1, 1
			req.Topics = append(req.Topics, rt)
			c, cancel := context.WithTimeout(ctx, 3*time.Second)
			resp, err := req.RequestWith(c, vc.SeedBrokers()[0])
			cancel()
			vc.Close()
			if err != nil || resp.Topics[0].ErrorCode == kerr.NotController.Code {
				continue
			}
			if active > 0 || resp.Topics[0].ErrorCode != 0 {
				return -1
			}
			active = int32(id)
		}
		return active
	}
	var ctlID int32
	waitFor(t, 20*time.Second, "one active controller among the voters", func() bool {
		ctlID = activeVoter()
		return ctlID > 0
	})
	t.Logf("cluster of 3 controllers and 2 brokers formed %v after start; active controller %d", formed, ctlID)

	// DescribeQuorum through a broker lists the three voters and, as
	// observers, the two brokers that fetch the metadata log.
	waitFor(t, 20*time.Second, "DescribeQuorum listing voters 1-3 and observers 4 and 5", func() bool {
		req := kmsg.NewPtrDescribeQuorumRequest()
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = "__cluster_metadata"
		rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
		req.Topics = append(req.Topics, rt)
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		resp, err := req.RequestWith(c, cl.Broker(4))
		if err != nil || resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return false
		}
		p := resp.Topics[0].Partitions[0]
		var voters, observers []int32
		for _, v := range p.CurrentVoters {
			voters = append(voters, v.ReplicaID)
		}
		for _, o := range p.Observers {
			if o.LogEndOffset < 0 || o.LastFetchTimestamp <= 0 {
				return false
			}
			observers = append(observers, o.ReplicaID)
		}
		slices.Sort(voters)
		return p.ErrorCode == 0 && slices.Equal(voters, []int32{1, 2, 3}) && slices.Equal(observers, both)
	})

	// An RF=1 topic is spread over both brokers and serves both.
	const topic = "spread"
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, topic); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	leaders := func(on int, name string) map[int32]int32 {
		m := metadataOn(on, name)
		if m == nil || len(m.Topics) != 1 || m.Topics[0].ErrorCode != 0 {
			return nil
		}
		out := map[int32]int32{}
		for _, p := range m.Topics[0].Partitions {
			out[p.Partition] = p.Leader
		}
		return out
	}
	var placed map[int32]int32
	waitFor(t, 20*time.Second, "4 partitions led by the brokers", func() bool {
		placed = leaders(4, topic)
		if len(placed) != 4 {
			return false
		}
		for _, l := range placed {
			if l != 4 && l != 5 {
				return false
			}
		}
		return true
	})
	byBroker := map[int32][]int32{}
	for p, l := range placed {
		byBroker[l] = append(byBroker[l], p)
	}
	if len(byBroker) != 2 {
		t.Fatalf("partitions not spread over both brokers: %v", placed)
	}
	produce := func(value string, parts []int32) {
		t.Helper()
		produceEach(t, ctx, cl, topic, value, parts)
	}
	consume := func(parts []int32, want int) map[string]int {
		t.Helper()
		return consumeFromStart(t, ctx, seeds, topic, parts, want, 20*time.Second)
	}
	all := []int32{0, 1, 2, 3}
	produce("first", all)
	got := consume(all, 4)
	for _, p := range all {
		if got[fmt.Sprintf("%d:first", p)] != 1 {
			t.Fatalf("partition %d not read back: %v", p, got)
		}
	}

	// A consumer group: its coordinator is the broker that leads its
	// __consumer_offsets partition, whatever the voters' roles.
	gc, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup("split-group"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	grouped := 0
	for deadline := time.Now().Add(30 * time.Second); grouped < 4 && time.Now().Before(deadline); {
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		grouped += gc.PollFetches(c).NumRecords()
		cancel()
	}
	if grouped < 4 {
		t.Fatalf("consumer group read %d of 4 records", grouped)
	}
	if err := gc.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("committing group offsets: %v", err)
	}
	gc.Close()
	offs, err := adm.FetchOffsets(ctx, "split-group")
	if err != nil || offs.Error() != nil {
		t.Fatalf("fetching the group's offsets: %v %v", err, offs.Error())
	}
	for _, p := range all {
		if o, ok := offs.Lookup(topic, p); !ok || o.At != 1 {
			t.Fatalf("group offset of partition %d: %+v", p, o)
		}
	}

	// The controllers are not brokers: a controller listener serves no
	// Metadata (its ApiVersions does not list it).
	cc, err := kgo.NewClient(kgo.SeedBrokers(fmt.Sprintf("127.0.0.1:%d", ctlPorts[1])))
	if err != nil {
		t.Fatal(err)
	}
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cc.SeedBrokers()[0])
	cc.Close()
	if err != nil || slices.ContainsFunc(av.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == 3 }) {
		t.Fatalf("controller listener ApiVersions: %v, lists Metadata: %v", err, av)
	}

	// SIGKILL of broker 5: fenced, out of Metadata; topics created while
	// it is down push the controllers past a snapshot and a compaction.
	killed := time.Now()
	procs[5].kill()
	// The active controller holds broker 5's heartbeat connection: when it
	// resets and a dial of broker 5's registered listener is refused, the
	// broker is fenced at once (the process-gone probe). The bound is the
	// 4 s session timeout's, which fences it in any case.
	fencedIn := waitFor(t, 20*time.Second, "broker 5 fenced", func() bool { return slices.Equal(brokersOn(4), []int32{4}) })
	if fencedIn > 10*time.Second {
		t.Fatalf("killed broker 5 fenced only %v after the kill, well past its 4 s session timeout", fencedIn)
	}
	if fencedIn > 3*time.Second {
		var said []string
		for id := 1; id <= nCtl; id++ {
			for _, l := range strings.Split(logs[id].String(), "\n") {
				if strings.Contains(l, "fenced") || strings.Contains(l, "gone") {
					said = append(said, l)
				}
			}
		}
		t.Logf("killed broker 5 was fenced after %v, by its session timeout, not at once; the controllers said:\n%s", fencedIn, strings.Join(said, "\n"))
	}
	t.Logf("kill -9 of broker 5: out of Metadata after %v", fencedIn)
	var whileDown []string
	for i := range 6 {
		name := fmt.Sprintf("while-down-%d", i)
		r, err := adm.CreateTopic(ctx, 3, 1, nil, name)
		if err != nil || r.Err != nil {
			t.Fatalf("CreateTopic %s with broker 5 down: %v %v", name, err, r.Err)
		}
		whileDown = append(whileDown, name)
	}
	snapshotted := waitFor(t, 20*time.Second, "a controller snapshot", func() bool {
		for id := 1; id <= nCtl; id++ {
			if _, err := os.Stat(filepath.Join(procs[id].dir, "__cluster_metadata-0", "raft", "snapshot")); err == nil {
				return true
			}
		}
		return false
	})
	t.Logf("a controller snapshot file exists %v after the topics were created", snapshotted)
	procs[5].start(t, bin, logs[5])
	backIn := waitFor(t, 30*time.Second, "broker 5 back in Metadata", func() bool {
		return slices.Equal(brokersOn(4), both) && slices.Equal(brokersOn(5), both)
	})
	if !strings.Contains(logs[5].String(), "observer restored a snapshot") {
		t.Fatalf("restarted broker 5 did not catch up from a snapshot:\n%s", logs[5].String())
	}
	for _, name := range whileDown {
		if m := metadataOn(5, name); m == nil || len(m.Topics) != 1 || m.Topics[0].ErrorCode != 0 || len(m.Topics[0].Partitions) != 3 {
			t.Fatalf("restarted broker 5 does not know %s: %+v", name, m)
		}
	}
	waitFor(t, 20*time.Second, "broker 5 leading its partitions again", func() bool {
		now := leaders(5, topic)
		for _, p := range byBroker[5] {
			if now[p] != 5 {
				return false
			}
		}
		return true
	})
	produce("second", byBroker[5])
	got = consume(byBroker[5], 2*len(byBroker[5]))
	for _, p := range byBroker[5] {
		if got[fmt.Sprintf("%d:first", p)] != 1 || got[fmt.Sprintf("%d:second", p)] != 1 {
			t.Fatalf("partition %d after broker 5's restart: %v", p, got)
		}
	}
	t.Logf("broker 5 restarted after a controller snapshot: caught up from it and listed again %v after the restart (%v since the kill)",
		backIn, time.Since(killed))

	// SIGKILL of the active controller: another voter takes over,
	// CreateTopics through a broker (forwarded) works again, and both
	// brokers keep serving their partitions.
	killed = time.Now()
	procs[int(ctlID)].kill()
	var newCtl int32
	electedIn := waitFor(t, 30*time.Second, "a new active controller", func() bool {
		newCtl = activeVoter()
		return newCtl > 0
	})
	waitFor(t, 30*time.Second, "CreateTopics through a broker after the failover", func() bool {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r, err := adm.CreateTopic(c, 2, 1, nil, "after-failover")
		return err == nil && (r.Err == nil || errors.Is(r.Err, kerr.TopicAlreadyExists))
	})
	t.Logf("kill -9 of active controller %d: controller %d named after %v; CreateTopics answered %v after the kill",
		ctlID, newCtl, electedIn, time.Since(killed))
	procs[int(ctlID)].start(t, bin, logs[int(ctlID)])
	// Up before the SIGTERM at the end: a signal that came before the
	// process installed its handler would end it with the default action.
	waitFor(t, 30*time.Second, "the restarted controller listening", func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ctlPorts[int(ctlID)]), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	produce("third", all)
	got = consume(all, 4+len(byBroker[5])+4)
	for _, p := range all {
		if got[fmt.Sprintf("%d:third", p)] != 1 {
			t.Fatalf("partition %d after the controller failover: %v", p, got)
		}
	}

	// SIGKILL of the active controller and a broker at once: the new
	// controller never hears from the dead broker, so no heartbeat
	// connection of it ends there; it probes brokers it has not heard
	// from and fences this one at once, well before the session timeout
	// (9 s from a last heartbeat at most 2 s before the kill) could.
	ctlID = newCtl
	killed = time.Now()
	procs[int(ctlID)].kill()
	procs[4].kill()
	waitFor(t, 30*time.Second, "broker 4 fenced by a new controller", func() bool { return slices.Equal(brokersOn(5), []int32{5}) })
	if goneIn := time.Since(killed); goneIn > 6*time.Second {
		t.Fatalf("a broker killed with the active controller was fenced %v after the kill: by its session timeout, not at once", goneIn)
	} else {
		t.Logf("kill -9 of active controller %d and broker 4 together: broker 4 fenced %v after the kill", ctlID, goneIn)
	}

	// SIGTERM stops brokers and controllers cleanly (exit status 0).
	for id, p := range procs {
		if p.cmd == nil {
			delete(procs, id)
			continue
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for id, p := range procs {
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case err := <-done:
			p.cmd = nil
			if err != nil {
				t.Errorf("node %d stopped with %v", id, err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("node %d did not stop within 20 s of SIGTERM", id)
		}
	}
	t.Logf("whole test %v", time.Since(began))
}
