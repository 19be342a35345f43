package linearizability

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

func genValid(t testing.TB, c genConfig) []Op {
	t.Helper()
	h := generate(c)
	rep, err := Check(h, Options{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Valid() {
		t.Fatalf("generated history (seed %d) reported invalid:\n%s", c.seed, rep.Summary())
	}
	return h
}

func small(seed uint64) genConfig {
	return genConfig{seed: seed, ops: 2000, partitions: 3, clients: 6, unknownRate: 0.02, failRate: 0.02}
}

func smallTxn(seed uint64) genConfig {
	c := small(seed)
	c.txnClients = 2
	return c
}

func TestGeneratedHistoriesAreValid(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		for _, c := range []genConfig{small(seed), smallTxn(seed)} {
			h := genValid(t, c)
			rep, _ := Check(h, Options{})
			for k, v := range rep.Linearizability {
				if v != "Ok" && v != "ok" {
					t.Fatalf("seed %d: %s: %s", seed, k, v)
				}
			}
		}
	}
}

func mustReport(t *testing.T, h []Op, k Kind) *Report {
	t.Helper()
	rep, err := Check(h, Options{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(k) == 0 {
		t.Fatalf("planted %s not reported; report:\n%s", k, rep.Summary())
	}
	if k != KindUnseen && rep.Valid() {
		t.Fatalf("history with planted %s judged valid", k)
	}
	t.Logf("planted %s: %s", k, firstOf(rep, k))
	return rep
}

func firstOf(rep *Report, k Kind) string {
	for _, a := range append(rep.Anomalies, rep.Info...) {
		if a.Kind == k {
			return a.String()
		}
	}
	return ""
}

// readAcked returns a produce acknowledged at some offset and read by some
// fetch that also returned a later offset, outside transactions.
func readAcked(t *testing.T, h []Op) (prod int, fetches []int) {
	t.Helper()
	for i := range h {
		p := &h[i]
		if p.Op != OpProduce || p.Outcome != OutcomeOK || p.Txn != "" {
			continue
		}
		fetches = nil
		for j := range h {
			f := &h[j]
			if f.Op != OpFetch || f.TP() != p.TP() {
				continue
			}
			for k, r := range f.Records {
				if r.Value == p.Value && k+1 < len(f.Records) {
					fetches = append(fetches, j)
				}
			}
		}
		if len(fetches) > 0 {
			return i, fetches
		}
	}
	t.Fatal("no read acknowledged produce in generated history")
	return 0, nil
}

func removeRecord(f *Op, value string) {
	out := f.Records[:0]
	for _, r := range f.Records {
		if r.Value != value {
			out = append(out, r)
		}
	}
	f.Records = out
}

func TestPlantLostWrite(t *testing.T) {
	h := genValid(t, small(11))
	p, _ := readAcked(t, h)
	for j := range h {
		if h[j].Op == OpFetch {
			removeRecord(&h[j], h[p].Value)
		}
	}
	mustReport(t, h, KindLostWrite)
}

func TestPlantSkippedWrite(t *testing.T) {
	// Only one fetch skips it; another still read it.
	h := genValid(t, small(12))
	p, fetches := readAcked(t, h)
	removeRecord(&h[fetches[0]], h[p].Value)
	mustReport(t, h, KindLostWrite)
}

func TestPlantDuplicate(t *testing.T) {
	h := genValid(t, small(13))
	p, fetches := readAcked(t, h)
	// The same value appears again, at a fresh offset past the end.
	f := &h[fetches[0]]
	f.Records = append(f.Records, Record{Offset: 1 << 40, Value: h[p].Value})
	mustReport(t, h, KindDuplicate)
}

func TestPlantInconsistentOffset(t *testing.T) {
	h := genValid(t, small(14))
	// Two acknowledged produces at one offset.
	var a, b = -1, -1
	for i := range h {
		if h[i].Op == OpProduce && h[i].Outcome == OutcomeOK && h[i].TP() == (TP{"t", 0}) {
			if a < 0 {
				a = i
			} else if b < 0 {
				b = i
			}
		}
	}
	h[b].Offset = Int64(*h[a].Offset)
	mustReport(t, h, KindInconsistentOffset)
}

func TestPlantWrongRead(t *testing.T) {
	h := genValid(t, small(15))
	_, fetches := readAcked(t, h)
	h[fetches[0]].Records[0].Value = "never-written"
	mustReport(t, h, KindWrongRead)
}

func TestPlantReadOfFailedProduce(t *testing.T) {
	h := genValid(t, small(16))
	p, fetches := readAcked(t, h)
	h[p].Outcome, h[p].Offset = OutcomeFail, nil
	_ = fetches
	mustReport(t, h, KindWrongRead)
}

func TestPlantNonMonotonicFetch(t *testing.T) {
	h := genValid(t, small(17))
	_, fetches := readAcked(t, h)
	r := h[fetches[0]].Records
	r[0], r[1] = r[1], r[0]
	mustReport(t, h, KindNonMonotonicFetch)
}

func TestPlantCommitBackwards(t *testing.T) {
	h := genValid(t, small(18))
	// A fetch_committed after everything reads -1 where a positive offset
	// was read before.
	var last int = -1
	for i := range h {
		if h[i].Op == OpFetchCommitted && h[i].Outcome == OutcomeOK && *h[i].Offset > 0 {
			last = i
		}
	}
	if last < 0 {
		t.Fatal("no fetch_committed with an offset")
	}
	end := h[len(h)-1].ReturnNs + 1000
	o := h[last]
	o.Client, o.CallNs, o.ReturnNs, o.Offset = "late", end, end+10, Int64(-1)
	h = append(h, o)
	mustReport(t, h, KindCommitBackwards)
}

// txnProduce finds an acknowledged transactional produce whose transaction
// ended as commit says.
func txnProduce(t *testing.T, h []Op, commit bool) (prod, end int) {
	t.Helper()
	ends := map[string]int{}
	for i := range h {
		if h[i].Op == OpEndTxn && h[i].Outcome == OutcomeOK {
			ends[h[i].Txn] = i
		}
	}
	for i := range h {
		p := &h[i]
		if p.Op == OpProduce && p.Txn != "" && p.Outcome == OutcomeOK {
			if e, ok := ends[p.Txn]; ok && *h[e].Commit == commit {
				return i, e
			}
		}
	}
	t.Fatal("no such transactional produce")
	return 0, 0
}

func TestPlantAbortedRead(t *testing.T) {
	h := genValid(t, smallTxn(19))
	p, _ := txnProduce(t, h, false)
	end := h[len(h)-1].ReturnNs + 1000
	h = append(h, Op{Client: "late", Op: OpFetch, Topic: "t", Partition: h[p].Partition, From: Int64(*h[p].Offset),
		Isolation: ReadCommitted, Records: []Record{{Offset: *h[p].Offset, Value: h[p].Value}},
		CallNs: end, ReturnNs: end + 10, Outcome: OutcomeOK})
	mustReport(t, h, KindAbortedRead)
}

func TestPlantOpenTxnRead(t *testing.T) {
	h := genValid(t, smallTxn(20))
	p, e := txnProduce(t, h, true)
	call := h[p].ReturnNs
	if h[e].CallNs <= call+1 {
		t.Skip("commit sent immediately after the produce")
	}
	h = append(h, Op{Client: "early", Op: OpFetch, Topic: "t", Partition: h[p].Partition, From: Int64(*h[p].Offset),
		Isolation: ReadCommitted, Records: []Record{{Offset: *h[p].Offset, Value: h[p].Value}},
		CallNs: call, ReturnNs: call + 1, Outcome: OutcomeOK})
	mustReport(t, h, KindOpenTxnRead)
}

func TestUnseenIsInfo(t *testing.T) {
	c := small(21)
	c.unknownRate, c.failRate = 0, 0
	h := genValid(t, c)
	var hw int64
	for i := range h {
		if h[i].Op == OpProduce && h[i].Partition == 1 && *h[i].Offset >= hw {
			hw = *h[i].Offset + 1
		}
	}
	// A write after every read of its partition.
	end := h[len(h)-1].ReturnNs + 1000
	h = append(h, Op{Client: "late", Op: OpProduce, Topic: "t", Partition: 1, Value: "last-word",
		CallNs: end, ReturnNs: end + 10, Outcome: OutcomeOK, Offset: Int64(hw)})
	rep, err := Check(h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(KindUnseen) == 0 {
		t.Fatalf("unseen write not reported:\n%s", rep.Summary())
	}
	if !rep.Valid() {
		t.Fatalf("unseen write made the history invalid:\n%s", rep.Summary())
	}
}

func TestPlantStaleRead(t *testing.T) {
	// Direct checks cannot see a stale high watermark; porcupine must, with
	// and without transaction markers in the partition.
	for _, c := range []genConfig{small(22), smallTxn(23)} {
		h := genValid(t, c)
		maxAcked := int64(-1)
		for i := range h {
			if h[i].Op == OpProduce && h[i].Outcome == OutcomeOK && h[i].Partition == 0 && *h[i].Offset > maxAcked {
				maxAcked = *h[i].Offset
			}
		}
		// After everything, list_offsets latest claims the last
		// acknowledged offset is not there yet.
		end := h[len(h)-1].ReturnNs + 1000
		h = append(h, Op{Client: "late", Op: OpListOffsets, Topic: "t", Partition: 0, Kind: KindLatest,
			CallNs: end, ReturnNs: end + 10, Outcome: OutcomeOK, Offset: Int64(maxAcked)})
		rep := mustReport(t, h, KindNotLinearizable)
		if len(rep.Anomalies) != 1 {
			t.Fatalf("stale read misclassified:\n%s", rep.Summary())
		}
	}
}

func TestPlantReorderedProduces(t *testing.T) {
	// Two produces, one acknowledged before the other began, with swapped
	// offsets everywhere: only real-time order shows it.
	h := []Op{
		{Client: "a", Op: OpProduce, Topic: "t", Value: "x", CallNs: 0, ReturnNs: 10, Outcome: OutcomeOK, Offset: Int64(1)},
		{Client: "b", Op: OpProduce, Topic: "t", Value: "y", CallNs: 20, ReturnNs: 30, Outcome: OutcomeOK, Offset: Int64(0)},
		{Client: "c", Op: OpFetch, Topic: "t", From: Int64(0), CallNs: 40, ReturnNs: 50, Outcome: OutcomeOK,
			Records: []Record{{0, "y"}, {1, "x"}}, HighWatermark: Int64(2)},
	}
	mustReport(t, h, KindNotLinearizable)
	h[1].CallNs = 5 // now concurrent: valid
	rep, err := Check(h, Options{})
	if err != nil || !rep.Valid() {
		t.Fatalf("concurrent produces judged invalid: %v\n%s", err, rep.Summary())
	}
}

func TestUnknownMayOrMayNotHappen(t *testing.T) {
	for _, read := range []bool{false, true} {
		h := []Op{
			{Client: "a", Op: OpProduce, Topic: "t", Value: "x", CallNs: 0, ReturnNs: 10, Outcome: OutcomeUnknown},
			{Client: "b", Op: OpProduce, Topic: "t", Value: "y", CallNs: 20, ReturnNs: 30, Outcome: OutcomeOK, Offset: Int64(0)},
			{Client: "c", Op: OpListOffsets, Kind: KindLatest, Topic: "t", CallNs: 40, ReturnNs: 50, Outcome: OutcomeOK, Offset: Int64(1)},
		}
		if read {
			h[1].Offset = Int64(1)
			h[2].Offset = Int64(2)
			h = append(h, Op{Client: "c", Op: OpFetch, Topic: "t", From: Int64(0), CallNs: 60, ReturnNs: 70, Outcome: OutcomeOK,
				Records: []Record{{0, "x"}, {1, "y"}}, HighWatermark: Int64(2)})
		}
		rep, err := Check(h, Options{})
		if err != nil || !rep.Valid() {
			t.Fatalf("read=%v: %v\n%s", read, err, rep.Summary())
		}
	}
}

func TestTimeoutIsNeverValid(t *testing.T) {
	h := generate(genConfig{seed: 3, ops: 20000, partitions: 1, clients: 8, unknownRate: 0.3})
	rep, err := Check(h, Options{Timeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Valid() || rep.Count(KindLinearizabilityUnknown) == 0 {
		t.Fatalf("timed-out check not reported unknown:\n%s", rep.Summary())
	}
}

func TestReadWriteRoundTrip(t *testing.T) {
	h := generate(smallTxn(4))
	var b bytes.Buffer
	if err := Write(&b, h); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(h) {
		t.Fatalf("read %d ops, wrote %d", len(got), len(h))
	}
	var b2 bytes.Buffer
	if err := Write(&b2, got); err != nil {
		t.Fatal(err)
	}
	var b1 bytes.Buffer
	_ = Write(&b1, h)
	if b1.String() != b2.String() {
		t.Fatal("round trip changed the history")
	}
}

func TestReadRejectsMalformed(t *testing.T) {
	for _, line := range []string{
		`{"client":"a","op":"produce","topic":"t","partition":0,"value":"v","call_ns":1,"return_ns":2,"outcome":"ok"}`,
		`{"client":"a","op":"produce","topic":"t","partition":0,"value":"v","call_ns":3,"return_ns":2,"outcome":"fail"}`,
		`{"client":"a","op":"teleport","call_ns":1,"return_ns":2,"outcome":"ok"}`,
		`{"client":"a","op":"fetch","topic":"t","from":0,"call_ns":1,"return_ns":2,"outcome":"maybe"}`,
		`{"client":"a","op":"fetch","topic":"t","from":0,"extra":1,"call_ns":1,"return_ns":2,"outcome":"ok"}`,
		`{"client":`,
	} {
		if _, err := Read(strings.NewReader(line + "\n")); err == nil {
			t.Errorf("accepted %s", line)
		}
	}
	ok := `{"client":"java-1","op":"produce","topic":"t","partition":0,"value":"v-17","call_ns":100,"return_ns":250,"outcome":"ok","offset":41}`
	withErr := `{"client":"a","op":"produce","topic":"t","partition":0,"value":"w","call_ns":1,"return_ns":2,"outcome":"unknown","error":{"code":"REQUEST_TIMED_OUT","message":"x"}}`
	if _, err := Read(strings.NewReader(ok + "\n\n" + withErr + "\n")); err != nil {
		t.Fatalf("rejected the issue's example: %v", err)
	}
}

func TestRecorderConcurrent(t *testing.T) {
	var b bytes.Buffer
	rec := NewRecorder(&b)
	var wg sync.WaitGroup
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				call := rec.Begin()
				if err := rec.End(call, Op{Client: "c", Op: OpListOffsets, Topic: "t", Kind: KindLatest, Outcome: OutcomeOK, Offset: Int64(0)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	h, err := Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 1600 || rec.Len() != 1600 {
		t.Fatalf("recorded %d ops (Len %d), want 1600", len(h), rec.Len())
	}
	if err := rec.Add(Op{Op: "bogus"}); err == nil {
		t.Fatal("recorder accepted an invalid op")
	}
}

func TestLargeHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 operations")
	}
	h := generate(genConfig{seed: 7, ops: 100000, partitions: 8, clients: 16, txnClients: 2, unknownRate: 0.01, failRate: 0.01})
	start := time.Now()
	rep, err := Check(h, Options{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ops checked in %v: %s", len(h), time.Since(start), strings.TrimSpace(rep.Summary()))
	if !rep.Valid() {
		t.Fatal("generated history invalid")
	}
}

func BenchmarkCheck100k(b *testing.B) {
	h := generate(genConfig{seed: 7, ops: 100000, partitions: 8, clients: 16, txnClients: 2, unknownRate: 0.01, failRate: 0.01})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Check(h, Options{Timeout: time.Minute}); err != nil {
			b.Fatal(err)
		}
	}
}
