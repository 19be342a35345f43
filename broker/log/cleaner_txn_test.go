package log

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/record"
)

// txnModel tracks a random workload of plain and transactional writes:
// every record by offset with the transaction it belongs to, and each
// transaction's outcome.
type txnModel struct {
	recs    map[int64]txnRec
	outcome map[int]int // txn id -> 0 open, 1 committed, 2 aborted
	marker  map[int]int64
}

type txnRec struct {
	kv
	txn int // 0 for a non-transactional record
	pid int64
}

func (m *txnModel) status(o int64) int {
	r := m.recs[o]
	if r.txn == 0 {
		return 1
	}
	return m.outcome[r.txn]
}

// committedView folds the records a read_committed consumer sees.
func (m *txnModel) committedView(offsets []int64) map[string]string {
	v := map[string]string{}
	for _, o := range offsets {
		if m.status(o) != 1 {
			continue
		}
		r := m.recs[o]
		if r.value == nil {
			delete(v, string(r.key))
		} else {
			v[string(r.key)] = string(r.value)
		}
	}
	return v
}

// TestCleanerTxnModelRandom mixes plain writes with transactions of three
// producers that commit or abort at random, cleaning as it goes, and
// checks after every pass: the read_committed view of the cleaned log is
// the model's; every aborted record still served is covered by an aborted
// transaction in the index (so read_committed readers still skip it); and
// each producer's next sequence is still accepted (its last batch kept).
// After the last pass, no aborted record below the cleaned end remains.
func TestCleanerTxnModelRandom(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runTxnModel(t, seed) })
	}
}

func runTxnModel(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	c := newFakeClock()
	cfg := compactConfig()
	dir := t.TempDir()
	m, l := openTest(t, dir, c, cfg)
	defer func() { m.Close() }()
	mod := &txnModel{recs: map[int64]txnRec{}, outcome: map[int]int{}, marker: map[int]int64{}}
	type producer struct {
		pid  int64
		seq  int32
		open int // current txn id, 0 if none
	}
	prods := []*producer{{pid: 11}, {pid: 12}, {pid: 13}}
	nextTxn := 1
	randRecs := func() []kv {
		recs := make([]kv, 1+rng.Intn(3))
		for i := range recs {
			recs[i].key = []byte(fmt.Sprintf("k%02d", rng.Intn(20)))
			if rng.Intn(6) > 0 {
				recs[i].value = []byte(fmt.Sprintf("v%d", rng.Int63()%1000000))
			}
		}
		return recs
	}
	step := func() {
		now := c.Now().UnixMilli()
		c.Advance(time.Second)
		if rng.Intn(3) == 0 {
			recs := randRecs()
			info, err := l.Append(keyedBatch(t, record.Codec(rng.Intn(5)), now, recs...), 0)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range recs {
				mod.recs[info.FirstOffset+int64(i)] = txnRec{kv: r}
			}
			return
		}
		p := prods[rng.Intn(len(prods))]
		if p.open != 0 && rng.Intn(3) == 0 {
			commit := rng.Intn(2) == 0
			info, err := l.Append(record.ControlBatch(p.pid, 0, commit, 1, now), 0)
			if err != nil {
				t.Fatal(err)
			}
			mod.outcome[p.open] = map[bool]int{true: 1, false: 2}[commit]
			mod.marker[p.open] = info.FirstOffset
			p.open = 0
			return
		}
		if p.open == 0 {
			p.open = nextTxn
			mod.outcome[p.open] = 0
			nextTxn++
		}
		recs := randRecs()
		b := txnBatch(t, p.pid, p.seq, now, recs...)
		info, err := l.Append(b, 0)
		if err != nil {
			t.Fatalf("producer %d seq %d: %v", p.pid, p.seq, err)
		}
		p.seq += int32(len(recs))
		for i, r := range recs {
			mod.recs[info.FirstOffset+int64(i)] = txnRec{kv: r, txn: p.open, pid: p.pid}
		}
	}
	check := func(end int64, final bool) {
		t.Helper()
		var offsets []int64
		for _, b := range readAll(t, l, l.LogStartOffset()) {
			if b.Control() {
				continue
			}
			it, err := b.Records(1<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			for r, ok := it.Next(); ok; r, ok = it.Next() {
				o := r.OffsetIn(b)
				want := mod.recs[o]
				if string(want.key) != string(r.Key) || string(want.value) != string(r.Value) {
					t.Fatalf("offset %d: served %q=%q, appended %q=%q", o, r.Key, r.Value, want.key, want.value)
				}
				offsets = append(offsets, o)
				if mod.status(o) != 2 {
					continue
				}
				covered := false
				for _, a := range l.AbortedTxns(o, o+1) {
					covered = covered || (a.ProducerID == want.pid && a.FirstOffset <= o && o <= a.LastOffset)
				}
				if !covered {
					t.Fatalf("aborted record at %d served without an aborted-transaction entry", o)
				}
				if final && o < end && mod.marker[want.txn] < end {
					t.Fatalf("aborted record at %d survived a pass ending at %d", o, end)
				}
			}
		}
		var all []int64
		for o := range mod.recs {
			all = append(all, o)
		}
		sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
		// Records of open transactions count on neither side.
		got, want := mod.committedView(offsets), mod.committedView(all)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("read_committed view changed by cleaning:\n got %v\nwant %v", got, want)
		}
	}
	for round := 0; round < 6; round++ {
		for i := 0; i < 60; i++ {
			step()
		}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		st, _, err := m.CleanOnce()
		if err != nil {
			t.Fatal(err)
		}
		check(st.EndOffset, false)
	}
	// Close every transaction, let tombstones and markers age, clean twice.
	for _, p := range prods {
		if p.open != 0 {
			info, err := l.Append(record.ControlBatch(p.pid, 0, false, 1, c.Now().UnixMilli()), 0)
			if err != nil {
				t.Fatal(err)
			}
			mod.outcome[p.open], mod.marker[p.open] = 2, info.FirstOffset
			p.open = 0
		}
	}
	var end int64
	for i := 0; i < 2; i++ {
		info, err := l.Append(keyedBatch(t, record.CodecNone, c.Now().UnixMilli(), kv{[]byte("plain"), []byte(fmt.Sprint(i))}), 0)
		if err != nil {
			t.Fatal(err)
		}
		mod.recs[info.FirstOffset] = txnRec{kv: kv{[]byte("plain"), []byte(fmt.Sprint(i))}}
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
		c.Advance(2 * time.Hour)
		st, ok, err := m.CleanOnce()
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		end = st.EndOffset
	}
	check(end, true)
	// After a crash and recovery the cleaned log reads the same, and the
	// producers continue their sequences.
	m.crash()
	m, l = openTest(t, dir, c, cfg)
	check(end, true)
	for _, p := range prods {
		if _, err := l.Append(txnBatch(t, p.pid, p.seq, c.Now().UnixMilli(), kv{[]byte("z"), []byte("z")}), 0); err != nil {
			t.Fatalf("producer %d after cleaning and recovery: %v", p.pid, err)
		}
	}
}
