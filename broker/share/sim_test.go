package share

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSimulation drives a share-partition with seeded random fetches,
// acknowledgements, releases and lock expiries, persisting its state
// through the share coordinator, and checks after every step that the
// window is consistent and that a restart from the __share_group_state
// records loads the same SPSO, count of completed deliveries, and state of
// every record (an
// acquired record loads as available with its count before that
// delivery, since acquisition is not persisted). A failure names its
// seed and step, and replays exactly.
func TestSimulation(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { simulate(t, seed, 400) })
	}
}

func simulate(t *testing.T, seed int64, steps int) {
	rng := rand.New(rand.NewSource(seed))
	cfg := PartitionConfig{LockDuration: time.Second, DeliveryCountLimit: int16(2 + rng.Intn(5)), MaxRecordLocks: 5 + rng.Intn(30), AutoOffsetReset: ResetEarliest}
	key := StateKey{Group: "g", TopicID: [16]byte{1}, Partition: 0}
	sc := NewState(StateConfig{SnapshotUpdateRecordsPerSnapshot: 1 + rng.Intn(5)})
	var log []StateRecord
	step := func(m kmsg.Request) {
		if err := sc.Step(time.Time{}, StateRequest{Msg: m}); err != nil {
			t.Fatal(err)
		}
		rd := sc.Ready()
		log = append(log, rd.Records...)
		for _, r := range rd.Replies {
			if w, ok := r.Msg.(*kmsg.WriteShareGroupStateResponse); ok && w.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("seed %d: write refused: %d %v", seed, w.Topics[0].Partitions[0].ErrorCode, deref(w.Topics[0].Partitions[0].ErrorMessage))
			}
		}
	}
	init := kmsg.NewPtrInitializeShareGroupStateRequest()
	init.GroupID = key.Group
	init.Topics = []kmsg.InitializeShareGroupStateRequestTopic{{TopicID: key.TopicID, Partitions: []kmsg.InitializeShareGroupStateRequestTopicPartition{{StartOffset: -1}}}}
	step(init)

	now := time.UnixMilli(1_000_000)
	p := NewPartition(cfg)
	if err := p.Initialize(now, nil, LogOffsets{}); err != nil {
		t.Fatal(err)
	}
	var batches []Batch
	hwm := int64(0)
	members := []string{"a", "b", "c"}
	for i := 0; i < steps; i++ {
		switch op := rng.Intn(10); {
		case op < 2: // produce
			n := int64(1 + rng.Intn(6))
			batches = append(batches, Batch{BaseOffset: hwm, LastOffset: hwm + n - 1, ProducerID: -1})
			hwm += n
		case op < 5: // fetch
			from := p.NextFetchOffset()
			var fetched []Batch
			for _, b := range batches {
				if b.LastOffset >= from {
					fetched = append(fetched, b)
				}
			}
			if _, err := p.Acquire(now, members[rng.Intn(3)], fetched, nil, 1+rng.Intn(8)); err != nil {
				t.Fatal(err)
			}
		case op < 8: // acknowledge what a member holds
			m := members[rng.Intn(3)]
			var acks []Ack
			for o := p.StartOffset(); ; o++ {
				st, _, owner, ok := p.Record(o)
				if !ok {
					break
				}
				if st == Acquired && owner == m && rng.Intn(2) == 0 {
					acks = append(acks, Ack{FirstOffset: o, LastOffset: o, Types: []AckType{AckType(rng.Intn(5))}})
				}
			}
			if err := p.Acknowledge(now, m, acks); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, i, err)
			}
		case op < 9:
			p.ReleaseMember(members[rng.Intn(3)])
		default:
			now = now.Add(time.Duration(rng.Intn(1500)) * time.Millisecond)
			p.Tick(now)
		}
		if w := p.Ready(); w != nil {
			step(writeRequest(key, w.StateEpoch, 0, *w))
		}
		checkWindow(t, seed, i, p, cfg, now)
		checkRestart(t, seed, i, p, cfg, log, key)
	}
}

func checkWindow(t *testing.T, seed int64, i int, p *Partition, cfg PartitionConfig, now time.Time) {
	t.Helper()
	if st, _, _, ok := p.Record(p.StartOffset()); ok && st.terminal() {
		t.Fatalf("seed %d step %d: SPSO %d is %s", seed, i, p.StartOffset(), st)
	}
	if n := len(p.recs); n > cfg.MaxRecordLocks {
		t.Fatalf("seed %d step %d: %d records in flight past the limit %d", seed, i, n, cfg.MaxRecordLocks)
	}
	for o := p.StartOffset(); ; o++ {
		st, count, member, ok := p.Record(o)
		if !ok {
			break
		}
		if count > cfg.DeliveryCountLimit || count < 0 {
			t.Fatalf("seed %d step %d: offset %d delivered %d times (limit %d)", seed, i, o, count, cfg.DeliveryCountLimit)
		}
		if (st == Acquired) != (member != "") {
			t.Fatalf("seed %d step %d: offset %d is %s with owner %q", seed, i, o, st, member)
		}
		if st == Available && count >= cfg.DeliveryCountLimit {
			t.Fatalf("seed %d step %d: offset %d available after %d deliveries", seed, i, o, count)
		}
	}
}

func checkRestart(t *testing.T, seed int64, i int, p *Partition, cfg PartitionConfig, log []StateRecord, key StateKey) {
	t.Helper()
	sc := NewState(StateConfig{})
	for _, r := range log {
		if err := sc.Replay(r.Key, r.Value); err != nil {
			t.Fatal(err)
		}
	}
	v, ok := sc.State(key)
	if !ok {
		t.Fatalf("seed %d step %d: no state", seed, i)
	}
	if got, want := v.DeliveryCompleteCount, p.DeliveryCompleteCount(); got != want && !(got == -1 && want == 0) {
		t.Fatalf("seed %d step %d: persisted %d completed deliveries, the partition has %d", seed, i, got, want)
	}
	q := NewPartition(cfg)
	if err := q.Initialize(time.Time{}, &v, LogOffsets{}); err != nil {
		t.Fatal(err)
	}
	if q.StartOffset() != p.StartOffset() {
		t.Fatalf("seed %d step %d: SPSO %d reloads as %d", seed, i, p.StartOffset(), q.StartOffset())
	}
	for o := p.StartOffset(); ; o++ {
		st, count, _, ok := p.Record(o)
		if !ok {
			break
		}
		if st == Acquired {
			st, count = Available, count-1
		}
		qst, qcount, _, qok := q.Record(o)
		if !qok {
			qst, qcount = Available, 0 // past the persisted window: not yet delivered
		}
		if qst != st || qcount != count {
			t.Fatalf("seed %d step %d: offset %d is %s/%d, reloads as %s/%d", seed, i, o, st, count, qst, qcount)
		}
	}
}
