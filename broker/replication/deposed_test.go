package replication

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/partition"
	"github.com/cascade-kafka/cascade/broker/replica"
)

// changed is img after the partition change rec (leader, ISR).
func changed(t *testing.T, img *metadata.Image, rec metadata.PartitionChangeRecord) *metadata.Image {
	t.Helper()
	rec.TopicID, rec.LeaderRecoveryState = metadata.UUID{1}, metadata.LeaderRecoveryNoChange
	next, err := metadata.Apply(img, []metadata.Record{rec})
	if err != nil {
		t.Fatal(err)
	}
	return next
}

// deposeTo applies img, in which broker 2 leads, as the broker does: the
// partitions first (the image's leader epoch), then replication.
func deposeTo(t *testing.T, m *Manager, img *metadata.Image, between func()) {
	t.Helper()
	tt, _ := img.Topic(tp0.Topic)
	if err := m.parts.Sync([]partition.Spec{{TP: tp0, TopicID: [16]byte{1}, LeaderEpoch: tt.Partitions[tp0.Partition].LeaderEpoch,
		Config: log.DefaultConfig(), Replicated: true}}); err != nil {
		t.Fatal(err)
	}
	between()
	m.Apply(img)
}

// followerFetch is the partition of the next Fetch the fetcher of leader
// sends, and the fetcher.
func followerFetch(t *testing.T, m *Manager, leader int32) (kmsg.FetchRequestTopicPartition, *fetcher, *fetchState) {
	t.Helper()
	m.mu.Lock()
	f := m.fetchers[fetcherKey{leader: leader, index: m.fetcherIndex(tp0)}]
	m.mu.Unlock()
	if f == nil {
		t.Fatalf("no fetcher of leader %d", leader)
	}
	req, states, _ := f.request()
	if req == nil || len(req.Topics) != 1 || len(req.Topics[0].Partitions) != 1 {
		t.Fatalf("fetcher of leader %d: request %+v", leader, req)
	}
	fp := req.Topics[0].Partitions[0]
	return fp, f, states[partKey{id: [16]byte{1}, partition: fp.Partition}]
}

// diverged answers the fetcher's partition as a leader does whose epoch
// cache ends epoch at end below the follower's fetch offset (KIP-595).
func diverged(t *testing.T, f *fetcher, fs *fetchState, epoch int32, end int64) {
	t.Helper()
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = epoch, end
	rp.HighWatermark = end
	if err := f.process("leader", fs, &rp); err != nil {
		t.Fatal(err)
	}
}

// TestDeposedLeaderAppendKeepsItsEpoch is a leader that appended records
// its followers never fetched (it was paused) and resumes to find broker 2
// leading a newer epoch: a produce it checked while it still led is
// appended between the partitions taking the new image's epoch and
// replication making it a follower. That append is stamped with the epoch
// it led, so its follower fetch names that epoch and the new leader's
// diverging answer cuts everything it alone holds; stamped with the new
// epoch, the fetch would claim the new leader's epoch and the divergent
// records would stay under it for good. After the change appends are
// refused.
func TestDeposedLeaderAppendKeepsItsEpoch(t *testing.T) {
	m, p, _, _ := leaderSetup(t)
	if _, err := p.Append(batch(t, 3)); err != nil { // epoch 0: 0-2, replicated
		t.Fatal(err)
	}
	m.Appended(tp0)
	if _, err := m.FollowerFetch(tp0, 2, 20, 3, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Append(batch(t, 2)); err != nil { // 3-4, never fetched
		t.Fatal(err)
	}
	m.Appended(tp0)
	img := changed(t, image(t), metadata.PartitionChangeRecord{Leader: 2, ISR: []int32{2, 3}})
	var racing error
	deposeTo(t, m, img, func() {
		_, racing = p.Append(batch(t, 1)) // 5, checked as leader before the image
	})
	if racing != nil {
		t.Fatalf("the append checked while leading: %v", racing)
	}
	if e := p.Log().LatestEpoch(); e != 0 {
		t.Fatalf("the deposed leader's last append is in epoch %d, want the epoch it led, 0", e)
	}
	if _, err := p.Append(batch(t, 1)); !errors.Is(err, replica.ErrNotLeaderOrFollower) {
		t.Fatalf("append after becoming a follower: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	if err := m.CheckAppend(tp0, -1); !errors.Is(err, replica.ErrNotLeaderOrFollower) {
		t.Fatalf("CheckAppend on a follower: %v", err)
	}
	fp, f, fs := followerFetch(t, m, 2)
	if fp.FetchOffset != 6 || fp.LastFetchedEpoch != 0 || fp.CurrentLeaderEpoch != 1 {
		t.Fatalf("follower fetch at %d, last fetched epoch %d, leader epoch %d; want 6, 0, 1",
			fp.FetchOffset, fp.LastFetchedEpoch, fp.CurrentLeaderEpoch)
	}
	// The new leader's epoch 1 starts at 3, where its epoch 0 ends.
	diverged(t, f, fs, 0, 3)
	if p.LogEndOffset() != 3 || p.Log().LatestEpoch() != 0 {
		t.Fatalf("after the diverging epoch: log end %d, latest epoch %d; want 3, 0", p.LogEndOffset(), p.Log().LatestEpoch())
	}
	if fp, _, _ = followerFetch(t, m, 2); fp.FetchOffset != 3 || fp.LastFetchedEpoch != 0 {
		t.Fatalf("next fetch at %d, last fetched epoch %d; want 3, 0", fp.FetchOffset, fp.LastFetchedEpoch)
	}
}

// TestRestartedLeaderRefusesAppendsUntilItLeads is the same ex-leader
// restarted rather than resumed: its partition, open before replication
// applies the image, refuses appends, and as a follower it fetches with
// the epoch its own records carry.
func TestRestartedLeaderRefusesAppendsUntilItLeads(t *testing.T) {
	lm, err := log.Open(t.TempDir(), log.Options{RetentionCheckInterval: -1, CleanerBackoff: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	parts := partition.NewManager(dirLogs{lm})
	img := changed(t, image(t), metadata.PartitionChangeRecord{Leader: 2, ISR: []int32{2, 3}})
	if err := parts.Sync([]partition.Spec{{TP: tp0, TopicID: [16]byte{1}, LeaderEpoch: 1, Config: log.DefaultConfig(), Replicated: true}}); err != nil {
		t.Fatal(err)
	}
	p := parts.Get(tp0)
	if _, err := p.Append(batch(t, 1)); !errors.Is(err, replica.ErrNotLeaderOrFollower) {
		t.Fatalf("append before replication applied the image: %v", err)
	}
	// Its own records of epoch 0, written before the restart.
	l, _ := lm.Get(tp0)
	for range 2 {
		if _, err := l.Append(batch(t, 2), 0); err != nil {
			t.Fatal(err)
		}
	}
	m := New(Config{NodeID: 1, MinInsyncReplicas: 1, NumFetchers: 1, SocketTimeout: time.Second}, parts, &fakeController{})
	defer m.Close()
	m.Apply(img)
	if _, err := p.Append(batch(t, 1)); !errors.Is(err, replica.ErrNotLeaderOrFollower) {
		t.Fatalf("append as a follower: %v", err)
	}
	fp, f, fs := followerFetch(t, m, 2)
	if fp.FetchOffset != 4 || fp.LastFetchedEpoch != 0 {
		t.Fatalf("follower fetch at %d, last fetched epoch %d; want 4, 0", fp.FetchOffset, fp.LastFetchedEpoch)
	}
	diverged(t, f, fs, 0, 2)
	if p.LogEndOffset() != 2 {
		t.Fatalf("after the diverging epoch: log end %d, want 2", p.LogEndOffset())
	}
}

// TestFollowerDropsEpochItLedEmpty is a leader re-elected in a new epoch
// that appended nothing in it before broker 2 took over: its epoch cache
// ends with that epoch at its log end. The new leader answers its fetch
// with where the older epoch ends, its log end; the truncation there cuts
// no record but must drop the empty epoch (Kafka's UnifiedLog.truncateTo),
// or each fetch names it again and is answered the same, and the follower
// never replicates again.
func TestFollowerDropsEpochItLedEmpty(t *testing.T) {
	m, p, _, _ := leaderSetup(t)
	if _, err := p.Append(batch(t, 3)); err != nil { // epoch 0: 0-2
		t.Fatal(err)
	}
	m.Appended(tp0)
	img := changed(t, image(t), metadata.PartitionChangeRecord{Leader: 1}) // epoch 1, led by 1 again
	deposeTo(t, m, img, func() {})
	if e := p.Log().LatestEpoch(); e != 1 {
		t.Fatalf("re-elected: latest epoch %d, want 1", e)
	}
	img = changed(t, img, metadata.PartitionChangeRecord{Leader: 2, ISR: []int32{2, 3}}) // epoch 2
	deposeTo(t, m, img, func() {})
	fp, f, fs := followerFetch(t, m, 2)
	if fp.FetchOffset != 3 || fp.LastFetchedEpoch != 1 {
		t.Fatalf("follower fetch at %d, last fetched epoch %d; want 3, 1", fp.FetchOffset, fp.LastFetchedEpoch)
	}
	// Broker 2 never had epoch 1: its epoch 0 ends at 3, where its 2 starts.
	diverged(t, f, fs, 0, 3)
	if fp, _, _ = followerFetch(t, m, 2); fp.FetchOffset != 3 || fp.LastFetchedEpoch != 0 {
		t.Fatalf("after the diverging epoch: fetch at %d, last fetched epoch %d; want 3, 0", fp.FetchOffset, fp.LastFetchedEpoch)
	}
}
