package matrix

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// Shape of the live mixed-client group cell.
const (
	// mixedPartitions is the topic's partition count: the range assignor
	// gives each of three members exactly two, each of two members three.
	mixedPartitions = 6
	// mixedPerPartition is how many records each phase writes to every
	// partition; the leaving member reads exactly two partitions' worth.
	mixedPerPartition = 2
	// mixedWindowMs is how long the staying members stay in the group.
	mixedWindowMs = 8000
	// mixedSessionMs is every member's session timeout; its heartbeat
	// interval (a quarter) bounds how late a member notices a rebalance.
	mixedSessionMs = 3000
)

// mixedPeerOrder is the preference order of the clients that join the
// column client's group, and the library family of each: two clients of
// one family (librdkafka under Go and Python) would not mix libraries.
var mixedPeerOrder = []struct{ client, family string }{
	{"java", "java"},
	{"franz-go", "franz-go"},
	{"python-confluent-kafka", "librdkafka"},
	{"sarama", "sarama"},
	{"python-kafka-python", "kafka-python"},
	{"confluent-kafka-go", "librdkafka"},
}

func mixedFamily(client string) string {
	for _, p := range mixedPeerOrder {
		if p.client == client {
			return p.family
		}
	}
	if client == "franz-go-process" {
		return "franz-go"
	}
	return client
}

// mixedPeers picks two clients of other libraries than client: the
// selected clients first (so a run limited by MATRIX_CLIENTS provisions
// nothing more when it can), else any in mixedPeerOrder.
func mixedPeers(client string, selected []string) []string {
	sel := map[string]bool{}
	for _, c := range selected {
		sel[c] = true
	}
	used := map[string]bool{mixedFamily(client): true}
	var peers []string
	for _, onlySelected := range []bool{true, false} {
		for _, p := range mixedPeerOrder {
			if len(peers) == 2 {
				return peers
			}
			if used[p.family] || (onlySelected && !sel[p.client]) {
				continue
			}
			if _, ok := driver.Lookup(p.client); !ok {
				continue
			}
			used[p.family] = true
			peers = append(peers, p.client)
		}
	}
	return peers
}

// mixedMember is one member of a described generation.
type mixedMember struct {
	id, clientID string
	parts        []int32
}

// waitGeneration polls DescribeGroups until the group is Stable with n
// members whose range assignments of topic are disjoint and cover every
// partition, and returns them; at the deadline it fails with the last
// state seen.
func waitGeneration(ctx context.Context, adm *kadm.Client, group, topic string, n int, deadline time.Time) ([]mixedMember, error) {
	last := "not described yet"
	for {
		ms, state, err := describeMembers(ctx, adm, group, topic)
		switch {
		case err != nil:
			last = err.Error()
		case state != "Stable" || len(ms) != n:
			last = fmt.Sprintf("state %s with %d members", state, len(ms))
		default:
			if err := disjointCover(ms); err != nil {
				return nil, fmt.Errorf("stable generation of %d members: %w", n, err)
			}
			return ms, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("group %s had no stable generation of %d members in time (last: %s)", group, n, last)
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
}

func describeMembers(ctx context.Context, adm *kadm.Client, group, topic string) ([]mixedMember, string, error) {
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, "", err
	}
	g, ok := ds[group]
	if !ok {
		return nil, "", fmt.Errorf("group %s missing from DescribeGroups", group)
	}
	if g.Err != nil {
		return nil, "", g.Err
	}
	var ms []mixedMember
	for _, m := range g.Members {
		mm := mixedMember{id: m.MemberID, clientID: m.ClientID}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				if t.Topic == topic {
					mm.parts = append(mm.parts, t.Partitions...)
				}
			}
		}
		sort.Slice(mm.parts, func(i, j int) bool { return mm.parts[i] < mm.parts[j] })
		ms = append(ms, mm)
	}
	return ms, g.State, nil
}

// disjointCover checks that no partition is assigned twice and that every
// partition is assigned.
func disjointCover(ms []mixedMember) error {
	owner := map[int32]string{}
	for _, m := range ms {
		if len(m.parts) == 0 {
			return fmt.Errorf("member %s (%s) has no partition", m.id, m.clientID)
		}
		for _, p := range m.parts {
			if o, dup := owner[p]; dup {
				return fmt.Errorf("partition %d assigned to both %s and %s", p, o, m.id)
			}
			owner[p] = m.id
		}
	}
	for p := int32(0); p < mixedPartitions; p++ {
		if _, ok := owner[p]; !ok {
			return fmt.Errorf("partition %d assigned to no member", p)
		}
	}
	return nil
}

func describeGen(ms []mixedMember) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s %v", m.clientID, m.parts))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func partSet(ps []int32) string { return fmt.Sprint(ps) }

func readParts(rs []driver.Record, from map[int32]int64) []int32 {
	set := map[int32]bool{}
	for _, r := range rs {
		if r.Offset >= from[r.Partition] {
			set[r.Partition] = true
		}
	}
	out := make([]int32, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// mixedGroupRun is the live mixed-client group: the column client and two
// clients of other libraries are members of one classic group at once
// (all with the range assignor, the one every client offers). Once the
// broker reports a stable generation of the three, with disjoint
// assignments covering the six partitions, two records go to every
// partition; the column client's member reads exactly its two partitions'
// four records, commits and leaves. The broker must then report a stable
// generation of the two others covering every partition, and records
// written after it are read by the member assigned their partition. Every
// record is read at least once (a partition that moves between the
// staying members may be re-read, as they commit when they stop) and each
// committed offset is one a member reported committing.
func mixedGroupRun(ctx context.Context, e *Env, d driver.Driver) (string, error) {
	peerIDs := mixedPeers(d.Client(), e.clients)
	if len(peerIDs) < 2 {
		return "", fmt.Errorf("no two clients of other libraries than %s are registered", d.Client())
	}
	var peers []driver.Driver
	for _, id := range peerIDs {
		p, err := e.OpenAnother(ctx, id)
		if err != nil {
			return "", err
		}
		defer p.Close()
		peers = append(peers, p)
	}
	prod, err := e.OpenAnother(ctx, "franz-go")
	if err != nil {
		return "", err
	}
	defer prod.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.Seeds()...))
	if err != nil {
		return "", fmt.Errorf("observer client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	topic := e.Topic("mixed-group-" + d.Client())
	if err := createTopic(ctx, e, d, topic, mixedPartitions, nil); err != nil {
		return "", err
	}
	group := topic + "-g"
	type result struct {
		res driver.GroupConsumeResult
		err error
	}
	start := time.Now()
	base := driver.GroupConsume{Group: group, Topic: topic, TimeoutMs: mixedWindowMs, Commit: true, Assignor: "range", SessionTimeoutMs: mixedSessionMs}
	leaverReq := base
	leaverReq.Count = 2 * mixedPerPartition
	leaverDone := make(chan result, 1)
	go func() {
		res, err := d.GroupConsume(ctx, leaverReq)
		leaverDone <- result{res, err}
	}()
	stayerDone := make([]chan result, len(peers))
	for i, p := range peers {
		ch := make(chan result, 1)
		stayerDone[i] = ch
		req := base
		req.Count = 1 << 20 // Out of reach: a staying member stays the whole window.
		go func(p driver.Driver) {
			res, err := p.GroupConsume(ctx, req)
			ch <- result{res, err}
		}(p)
	}
	// Collects every member's answer before returning, so no goroutine
	// outlives the cell (each ends at its window or with ctx).
	var leaver result
	leaverIn := false
	stayers := make([]result, len(peers))
	stayersIn := false
	wait := func() {
		if !leaverIn {
			leaver, leaverIn = <-leaverDone, true
		}
		if !stayersIn {
			for i, ch := range stayerDone {
				stayers[i] = <-ch
			}
			stayersIn = true
		}
	}
	defer wait()

	// The window leaves the staying members time to read phase 2.
	genDeadline := start.Add(time.Duration(mixedWindowMs)*time.Millisecond - 2500*time.Millisecond)
	gen1, err := waitGeneration(ctx, adm, group, topic, 3, genDeadline)
	if err != nil {
		return "", err
	}
	gen1At := time.Since(start)
	phase := func(n int) (map[int32]int64, error) {
		recs := make([]driver.Record, 0, mixedPartitions*mixedPerPartition)
		for i := 0; i < mixedPerPartition; i++ {
			for p := int32(0); p < mixedPartitions; p++ {
				recs = append(recs, driver.Record{Partition: p, Value: []byte(fmt.Sprintf("%s-phase%d-%d-%d", topic, n, p, i))})
			}
		}
		dls, err := produceOK(ctx, prod, driver.Produce{Topic: topic, Records: recs, Acks: -1})
		if err != nil {
			return nil, err
		}
		first := map[int32]int64{}
		for i, dl := range dls {
			if o, ok := first[recs[i].Partition]; !ok || dl.Offset < o {
				first[recs[i].Partition] = dl.Offset
			}
		}
		return first, nil
	}
	phase1, err := phase(1)
	if err != nil {
		return "", err
	}
	leaver, leaverIn = <-leaverDone, true
	if leaver.err != nil {
		return "", fmt.Errorf("leaving member %s: %w", d.Client(), leaver.err)
	}
	gen2, err := waitGeneration(ctx, adm, group, topic, 2, genDeadline)
	if err != nil {
		return "", fmt.Errorf("after %s left: %w", d.Client(), err)
	}
	gen2At := time.Since(start)
	phase2, err := phase(2)
	if err != nil {
		return "", err
	}
	wait()
	for i, s := range stayers {
		if s.err != nil {
			return "", fmt.Errorf("staying member %s: %w", peerIDs[i], s.err)
		}
	}

	// The departed member is the one of generation 1 missing from 2; it
	// read exactly the phase-1 records of its partitions.
	in2 := map[string]bool{}
	for _, m := range gen2 {
		in2[m.id] = true
	}
	var gone []mixedMember
	for _, m := range gen1 {
		if !in2[m.id] {
			gone = append(gone, m)
		}
	}
	if len(gone) != 1 {
		return "", fmt.Errorf("generation 1 (%s) and 2 (%s) differ by %d members, want 1", describeGen(gen1), describeGen(gen2), len(gone))
	}
	if got := readParts(leaver.res.Records, nil); len(leaver.res.Records) != leaverReq.Count || partSet(got) != partSet(gone[0].parts) {
		return "", fmt.Errorf("leaving member %s read %d records of partitions %v, want %d of its assignment %v", d.Client(), len(leaver.res.Records), got, leaverReq.Count, gone[0].parts)
	}
	// Each staying member read phase 2 from exactly the partitions of one
	// member of generation 2.
	matched := map[string]bool{}
	for i, s := range stayers {
		got := partSet(readParts(s.res.Records, phase2))
		found := ""
		for _, m := range gen2 {
			if partSet(m.parts) == got && !matched[m.id] {
				found = m.id
			}
		}
		if found == "" {
			return "", fmt.Errorf("staying member %s read phase-2 records of partitions %s, which is no member's assignment in generation 2 (%s)", peerIDs[i], got, describeGen(gen2))
		}
		matched[found] = true
	}
	// Every record is read at least once. The members commit what they
	// read when they stop, so a staying member that lost a partition in
	// the second rebalance may commit its older position after the new
	// owner committed the end (the classic coordinator takes a commit of
	// the current generation for any partition, as Kafka's
	// GroupCoordinator does); each committed offset must be one a member
	// reported committing.
	seen := map[[2]int64]bool{}
	reported := map[[2]int64]bool{}
	for _, rs := range append([]result{leaver}, stayers...) {
		for _, r := range rs.res.Records {
			seen[[2]int64{int64(r.Partition), r.Offset}] = true
		}
		for _, c := range rs.res.Committed {
			reported[[2]int64{int64(c.Partition), c.Offset}] = true
		}
	}
	atEnd := 0
	for p := int32(0); p < mixedPartitions; p++ {
		for _, first := range []int64{phase1[p], phase2[p]} {
			for o := first; o < first+mixedPerPartition; o++ {
				if !seen[[2]int64{int64(p), o}] {
					return "", fmt.Errorf("partition %d offset %d was read by no member", p, o)
				}
			}
		}
		got, err := prod.FetchCommitted(ctx, driver.FetchCommitted{Group: group, Topic: topic, Partition: p})
		if err != nil {
			return "", fmt.Errorf("committed offset of partition %d: %w", p, err)
		}
		if !reported[[2]int64{int64(p), got}] {
			return "", fmt.Errorf("committed offset of partition %d is %d, which no member reported committing", p, got)
		}
		if got >= phase2[p]+mixedPerPartition {
			atEnd++
		}
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	commits := "every committed offset at the end"
	if atEnd < mixedPartitions {
		commits = fmt.Sprintf("%d of %d committed offsets at the end, the others a staying member's older position", atEnd, mixedPartitions)
	}
	return fmt.Sprintf("with %s: three members [%s] stable at %v; after %s left: [%s] stable at %v; every record read; %s",
		strings.Join(peerIDs, " and "), describeGen(gen1), gen1At.Round(100*time.Millisecond), d.Client(), describeGen(gen2), gen2At.Round(100*time.Millisecond), commits), nil
}

// mixedLiveScenario is scenario 7's mixed-client group: members of three
// client libraries in one group at the same time.
var mixedLiveScenario = Scenario{
	ID:      "7.mixed-client-group",
	Title:   "members of three client libraries share a group; one leaves, the others take over its partitions",
	Run:     mixedGroupRun,
	Timeout: 45 * time.Second,
	Solo:    true,
}
