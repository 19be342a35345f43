package quorum

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

var testVoters = []uint64{1, 2, 3}

func ent(index, term uint64, data string) *pb.Entry {
	return &pb.Entry{Index: new(index), Term: new(term), Type: pb.EntryNormal.Enum(), Data: []byte(data)}
}

func hardState(term, vote, commit uint64) *pb.HardState {
	return &pb.HardState{Term: new(term), Vote: new(vote), Commit: new(commit)}
}

func openStorage(t *testing.T, dir string) *Storage {
	t.Helper()
	s, err := OpenStorage(dir, testVoters)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// entriesOf returns the entries Storage serves from first to last.
func entriesOf(t *testing.T, s *Storage) []*pb.Entry {
	t.Helper()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if last < first {
		return nil
	}
	es, err := s.Entries(first, last+1, math.MaxUint64)
	if err != nil {
		t.Fatalf("entries [%d,%d]: %v", first, last, err)
	}
	return es
}

func wantEntries(t *testing.T, s *Storage, want ...*pb.Entry) {
	t.Helper()
	got := entriesOf(t, s)
	if len(got) != len(want) {
		t.Fatalf("got %d entries %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range got {
		if got[i].GetIndex() != want[i].GetIndex() || got[i].GetTerm() != want[i].GetTerm() || !bytes.Equal(got[i].GetData(), want[i].GetData()) {
			t.Fatalf("entry %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

func TestStorageRestoresHardStateEntriesAndSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := openStorage(t, dir)
	if err := s.Save(hardState(2, 1, 3), []*pb.Entry{ent(1, 1, "a"), ent(2, 2, "b"), ent(3, 2, "c"), ent(4, 2, "d")}, nil, true); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSnapshot(3, []byte("state@3"), 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(hardState(2, 1, 5), []*pb.Entry{ent(5, 2, "e")}, nil, true); err != nil {
		t.Fatal(err)
	}
	s.Close()

	r := openStorage(t, dir)
	hs := r.HardState()
	if hs.GetTerm() != 2 || hs.GetVote() != 1 || hs.GetCommit() != 5 {
		t.Fatalf("hard state %v, want term 2 vote 1 commit 5", hs)
	}
	snap, _ := r.Snapshot()
	if snap.GetMetadata().GetIndex() != 3 || snap.GetMetadata().GetTerm() != 2 || string(snap.GetData()) != "state@3" {
		t.Fatalf("snapshot %v", snap)
	}
	wantEntries(t, r, ent(4, 2, "d"), ent(5, 2, "e"))
	// The log was cut at the snapshot less the retained entry: entries 1
	// and 2 are gone from the file.
	b, _ := os.ReadFile(filepath.Join(dir, logFile))
	recs, _, err := decodeRecords(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.kind != kindEntry {
			continue
		}
		e := &pb.Entry{}
		if err := proto.Unmarshal(rec.data, e); err != nil {
			t.Fatal(err)
		}
		if e.GetIndex() < 3 {
			t.Fatalf("compacted entry %d still in the log file", e.GetIndex())
		}
	}
}

func TestStorageTornTailTruncated(t *testing.T) {
	dir := t.TempDir()
	s := openStorage(t, dir)
	if err := s.Save(hardState(1, 1, 0), []*pb.Entry{ent(1, 1, "a"), ent(2, 1, "b")}, nil, true); err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(filepath.Join(dir, logFile))
	valid := info.Size()
	if err := s.Save(nil, []*pb.Entry{ent(3, 1, "ccccccccc")}, nil, true); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Cut the last record short, as a crash mid-write would.
	if err := os.Truncate(filepath.Join(dir, logFile), valid+11); err != nil {
		t.Fatal(err)
	}
	r := openStorage(t, dir)
	wantEntries(t, r, ent(1, 1, "a"), ent(2, 1, "b"))
	if info, _ := os.Stat(filepath.Join(dir, logFile)); info.Size() != valid {
		t.Fatalf("log is %d bytes after open, want the valid %d", info.Size(), valid)
	}
	// The truncated log takes appends and reopens cleanly.
	if err := r.Save(nil, []*pb.Entry{ent(3, 1, "c")}, nil, true); err != nil {
		t.Fatal(err)
	}
	r.Close()
	wantEntries(t, openStorage(t, dir), ent(1, 1, "a"), ent(2, 1, "b"), ent(3, 1, "c"))
}

func TestStorageCorruptChecksumDetected(t *testing.T) {
	dir := t.TempDir()
	s := openStorage(t, dir)
	if err := s.Save(hardState(1, 1, 0), []*pb.Entry{ent(1, 1, "aaaa"), ent(2, 1, "bbbb")}, nil, true); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := filepath.Join(dir, logFile)
	b, _ := os.ReadFile(path)
	i := bytes.Index(b, []byte("aaaa"))
	b[i] = 'x' // a flipped byte in a record with records after it
	os.WriteFile(path, b, 0o644)
	if _, err := OpenStorage(dir, testVoters); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open with a corrupt middle record: %v, want ErrCorrupt", err)
	}

	// The same damage in the last record is a torn tail.
	dir2 := t.TempDir()
	s2 := openStorage(t, dir2)
	if err := s2.Save(hardState(1, 1, 0), nil, nil, true); err != nil {
		t.Fatal(err)
	}
	if err := s2.Save(nil, []*pb.Entry{ent(1, 1, "aaaa"), ent(2, 1, "bbbb")}, nil, true); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	path2 := filepath.Join(dir2, logFile)
	b2, _ := os.ReadFile(path2)
	b2[bytes.Index(b2, []byte("bbbb"))] = 'x'
	os.WriteFile(path2, b2, 0o644)
	wantEntries(t, openStorage(t, dir2), ent(1, 1, "aaaa"))
}

func TestStorageConflictingSuffixReplaced(t *testing.T) {
	dir := t.TempDir()
	s := openStorage(t, dir)
	if err := s.Save(hardState(1, 1, 1), []*pb.Entry{ent(1, 1, "a"), ent(2, 1, "b"), ent(3, 1, "c"), ent(4, 1, "d")}, nil, true); err != nil {
		t.Fatal(err)
	}
	// A new leader overwrites the uncommitted suffix from index 2.
	if err := s.Save(hardState(2, 2, 1), []*pb.Entry{ent(2, 2, "B"), ent(3, 2, "C")}, nil, true); err != nil {
		t.Fatal(err)
	}
	want := []*pb.Entry{ent(1, 1, "a"), ent(2, 2, "B"), ent(3, 2, "C")}
	wantEntries(t, s, want...)
	s.Close()
	wantEntries(t, openStorage(t, dir), want...)
}

func TestStorageReceivedSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := openStorage(t, dir)
	if err := s.Save(hardState(1, 1, 1), []*pb.Entry{ent(1, 1, "a"), ent(2, 1, "b")}, nil, true); err != nil {
		t.Fatal(err)
	}
	snap := &pb.Snapshot{Data: []byte("leader state"), Metadata: &pb.SnapshotMetadata{Index: new(uint64(10)), Term: new(uint64(3)), ConfState: pb.EnsureConfState(&pb.ConfState{Voters: testVoters})}}
	if err := s.Save(hardState(3, 0, 10), []*pb.Entry{ent(11, 3, "k")}, snap, true); err != nil {
		t.Fatal(err)
	}
	s.Close()
	r := openStorage(t, dir)
	got, _ := r.Snapshot()
	if got.GetMetadata().GetIndex() != 10 || string(got.GetData()) != "leader state" {
		t.Fatalf("snapshot %v", got)
	}
	wantEntries(t, r, ent(11, 3, "k"))
	if hs := r.HardState(); hs.GetTerm() != 3 || hs.GetCommit() != 10 {
		t.Fatalf("hard state %v", hs)
	}
}

// TestStorageSnapshotWithoutLogRewrite covers a crash after a received
// snapshot was written but before the log was rewritten: entries after
// the snapshot survive only if the old log agrees with it.
func TestStorageSnapshotWithoutLogRewrite(t *testing.T) {
	for _, tc := range []struct {
		name      string
		termAt3   uint64
		wantAfter bool
	}{{"agrees", 2, true}, {"diverges", 1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStorage(t, dir)
			if err := s.Save(hardState(2, 1, 2), []*pb.Entry{ent(1, 1, "a"), ent(2, 1, "b"), ent(3, tc.termAt3, "c"), ent(4, tc.termAt3, "d")}, nil, true); err != nil {
				t.Fatal(err)
			}
			snap := &pb.Snapshot{Data: []byte("s"), Metadata: &pb.SnapshotMetadata{Index: new(uint64(3)), Term: new(uint64(2)), ConfState: pb.EnsureConfState(&pb.ConfState{Voters: testVoters})}}
			if err := s.writeSnapshotFile(snap); err != nil {
				t.Fatal(err)
			}
			s.Close()
			r := openStorage(t, dir)
			if tc.wantAfter {
				wantEntries(t, r, ent(4, 2, "d"))
			} else {
				wantEntries(t, r)
			}
			if hs := r.HardState(); hs.GetCommit() != 3 {
				t.Fatalf("commit %d, want the snapshot's 3", hs.GetCommit())
			}
		})
	}
}

func TestStorageRefusesOtherVoters(t *testing.T) {
	dir := t.TempDir()
	s := openStorage(t, dir)
	if err := s.Save(hardState(1, 1, 1), []*pb.Entry{ent(1, 1, "a")}, nil, true); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSnapshot(1, []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := OpenStorage(dir, []uint64{1, 2, 4}); err == nil {
		t.Fatal("opened a snapshot of voters 1,2,3 as voters 1,2,4")
	}
}

func TestStorageSyncsBeforeReturning(t *testing.T) {
	s := openStorage(t, t.TempDir())
	before := s.syncs
	if err := s.Save(hardState(1, 1, 0), []*pb.Entry{ent(1, 1, "a")}, nil, true); err != nil {
		t.Fatal(err)
	}
	if s.syncs != before+1 {
		t.Fatalf("%d fsyncs for a must-sync save, want 1", s.syncs-before)
	}
	before = s.syncs
	if err := s.Save(hardState(1, 1, 1), nil, nil, false); err != nil {
		t.Fatal(err)
	}
	if s.syncs != before {
		t.Fatalf("%d fsyncs for a commit-only save, want 0", s.syncs-before)
	}
}

// FuzzDecodeRecords holds the log decoder to its contract on any bytes:
// no panic, a valid prefix that re-encodes to itself, and a tail that is
// either torn (nil error) or reported corrupt.
func FuzzDecodeRecords(f *testing.F) {
	var b []byte
	b = appendRecord(b, kindBase, encodeBase(0, 0))
	b = appendRecord(b, kindEntry, []byte("entry"))
	b = appendRecord(b, kindHardState, []byte{8, 1})
	f.Add(b)
	f.Add(b[:len(b)-2])
	f.Add(append(bytes.Clone(b), 0, 0, 0, 0, 0, 0, 0, 0, 0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, valid, err := decodeRecords(b)
		if valid < 0 || valid > len(b) {
			t.Fatalf("valid %d of %d bytes", valid, len(b))
		}
		var re []byte
		for _, r := range recs {
			re = appendRecord(re, r.kind, r.data)
		}
		if !bytes.Equal(re, b[:valid]) {
			t.Fatalf("records re-encode to %x, valid prefix is %x", re, b[:valid])
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v is not ErrCorrupt", err)
		}
		if err == nil && valid < len(b) {
			// A torn tail decodes to nothing more, however it is read.
			more, v2, _ := decodeRecords(b[valid:])
			if len(more) != 0 || v2 != 0 {
				t.Fatalf("torn tail %x holds %d records", b[valid:], len(more))
			}
		}
	})
}

// FuzzOpenStorage opens arbitrary log files: Open either refuses them with
// an error or serves a log raft can start on, never panics.
func FuzzOpenStorage(f *testing.F) {
	var b []byte
	b = appendRecord(b, kindBase, encodeBase(0, 0))
	for i := uint64(1); i <= 3; i++ {
		data, _ := proto.Marshal(ent(i, 1, "x"))
		b = appendRecord(b, kindEntry, data)
	}
	hs, _ := proto.Marshal(hardState(1, 1, 9))
	b = appendRecord(b, kindHardState, hs)
	f.Add(b)
	data, _ := proto.Marshal(ent(7, 1, "gap"))
	f.Add(appendRecord(bytes.Clone(b), kindEntry, data))
	f.Add(appendRecord(nil, kindBase, encodeBase(5, 2)))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, logFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := OpenStorage(dir, testVoters)
		if err != nil {
			return
		}
		defer s.Close()
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		if hs := s.HardState(); hs.GetCommit() > last || hs.GetCommit()+1 < first {
			t.Fatalf("commit %d outside the log [%d,%d]", hs.GetCommit(), first, last)
		}
		if last >= first {
			if _, err := s.Entries(first, last+1, math.MaxUint64); err != nil {
				t.Fatalf("entries [%d,%d]: %v", first, last, err)
			}
		}
	})
}
