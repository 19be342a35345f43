package quorum

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// File names inside the quorum directory.
const (
	logFile      = "log"
	snapshotFile = "snapshot"
	tmpSuffix    = ".tmp"
)

// Storage is the durable raft log of one node: an append-only log file of
// entries and hard states, and a snapshot file, in one directory. It serves
// raft from an in-memory raft.MemoryStorage (as etcd's raftexample does)
// that mirrors the files; every method that changes the files changes the
// memory view only after the files have it.
//
// Storage is not safe for concurrent use except through the read methods
// raft calls, which the embedded MemoryStorage locks.
type Storage struct {
	*raft.MemoryStorage

	dir    string
	voters []uint64
	f      *os.File
	hs     *pb.HardState
	snap   *pb.Snapshot
	err    error // sticky: after a failed write nothing more is written

	// sync makes a file durable; tests of the simulated cluster swap it to
	// keep hundreds of seeds fast, everything else uses (*os.File).Sync.
	sync func(*os.File) error
	// Syncs counts fsyncs, for tests.
	syncs int
}

// OpenStorage opens or creates the quorum directory dir for a quorum whose
// voters are voters. A torn log tail is truncated; a damaged file is
// ErrCorrupt. A snapshot whose voters differ from voters is refused: the
// voter set is static (controller.quorum.voters) and changing it would need
// a reconfiguration the quorum does not perform.
func OpenStorage(dir string, voters []uint64) (*Storage, error) {
	s := &Storage{
		MemoryStorage: raft.NewMemoryStorage(),
		dir:           dir,
		voters:        slices.Sorted(slices.Values(voters)),
		sync:          (*os.File).Sync,
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("quorum: create %s: %w", dir, err)
	}
	if err := s.load(); err != nil {
		if s.f != nil {
			s.f.Close()
		}
		return nil, err
	}
	return s, nil
}

func (s *Storage) path(name string) string { return filepath.Join(s.dir, name) }

func (s *Storage) confState() *pb.ConfState {
	return pb.EnsureConfState(&pb.ConfState{Voters: slices.Clone(s.voters)})
}

func (s *Storage) load() error {
	snap := &pb.Snapshot{}
	b, err := os.ReadFile(s.path(snapshotFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("quorum: read snapshot: %w", err)
	default:
		recs, valid, err := decodeRecords(b)
		if err != nil {
			return fmt.Errorf("snapshot file: %w", err)
		}
		// The snapshot file is renamed into place only once complete, so
		// any tear is corruption.
		if valid != len(b) || len(recs) != 1 || recs[0].kind != kindSnapshot {
			return fmt.Errorf("%w: snapshot file is not one snapshot record", ErrCorrupt)
		}
		if err := proto.Unmarshal(recs[0].data, snap); err != nil {
			return fmt.Errorf("%w: snapshot: %v", ErrCorrupt, err)
		}
	}
	snap = pb.EnsureSnapshot(snap)
	si, st := snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	if si == 0 {
		// The bootstrap snapshot: empty log, configured voters.
		snap.Metadata.ConfState = s.confState()
	} else if got := slices.Sorted(slices.Values(snap.GetMetadata().GetConfState().GetVoters())); !slices.Equal(got, s.voters) {
		return fmt.Errorf("quorum: snapshot voters %v differ from configured voters %v", got, s.voters)
	}

	base, baseTerm, ents, hs, rewrite, err := s.readLog()
	if err != nil {
		return err
	}
	switch {
	case base > si:
		return fmt.Errorf("%w: log starts after index %d but the snapshot is at %d", ErrCorrupt, base, si)
	case base == si && baseTerm != st:
		return fmt.Errorf("%w: log base term %d differs from snapshot term %d at index %d", ErrCorrupt, baseTerm, st, si)
	case base < si:
		// The log predates the snapshot (retained catch-up entries, or a
		// crash between writing a received snapshot and rewriting the log).
		// Entries after the snapshot are kept only if the log agrees with
		// the snapshot at its index; otherwise they came from another
		// history and raft discarded them when it restored the snapshot.
		off := si - base // ents[off-1] has index si
		if off <= uint64(len(ents)) && ents[off-1].GetTerm() == st {
			ents = ents[off:]
		} else {
			ents = nil
			rewrite = true
		}
	}
	last := si + uint64(len(ents))
	if hs == nil {
		hs = &pb.HardState{}
	}
	if hs.GetTerm() < st {
		// The snapshot came from a leader of term st: the node had already
		// moved to that term. A vote in an earlier term no longer counts.
		hs.Term, hs.Vote = new(st), new(uint64(0))
	}
	hs.Commit = new(min(max(hs.GetCommit(), si), last))

	if err := s.MemoryStorage.ApplySnapshot(snap); err != nil {
		return fmt.Errorf("quorum: load snapshot: %w", err)
	}
	if err := s.MemoryStorage.Append(ents); err != nil {
		return fmt.Errorf("quorum: load entries: %w", err)
	}
	if err := s.MemoryStorage.SetHardState(hs); err != nil {
		return err
	}
	s.snap, s.hs = snap, hs
	if rewrite {
		return s.rewriteLog(si, st, ents)
	}
	f, err := os.OpenFile(s.path(logFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("quorum: open log: %w", err)
	}
	s.f = f
	return nil
}

// readLog reads the log file. A missing file reads as an empty log based at
// zero with rewrite set, so that Open creates it.
func (s *Storage) readLog() (base, baseTerm uint64, ents []*pb.Entry, hs *pb.HardState, rewrite bool, err error) {
	b, err := os.ReadFile(s.path(logFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil, nil, true, nil
	}
	if err != nil {
		return 0, 0, nil, nil, false, fmt.Errorf("quorum: read log: %w", err)
	}
	recs, valid, err := decodeRecords(b)
	if err != nil {
		return 0, 0, nil, nil, false, fmt.Errorf("log file: %w", err)
	}
	if valid < len(b) {
		if err := os.Truncate(s.path(logFile), int64(valid)); err != nil {
			return 0, 0, nil, nil, false, fmt.Errorf("quorum: truncate torn log tail: %w", err)
		}
	}
	if len(recs) == 0 {
		// Torn before the base record was complete: the file was being
		// created, so it held nothing.
		return 0, 0, nil, nil, true, nil
	}
	if recs[0].kind != kindBase {
		return 0, 0, nil, nil, false, fmt.Errorf("%w: log does not start with its base", ErrCorrupt)
	}
	if base, baseTerm, err = decodeBase(recs[0].data); err != nil {
		return 0, 0, nil, nil, false, err
	}
	for _, r := range recs[1:] {
		switch r.kind {
		case kindEntry:
			e := &pb.Entry{}
			if err := proto.Unmarshal(r.data, e); err != nil {
				return 0, 0, nil, nil, false, fmt.Errorf("%w: entry: %v", ErrCorrupt, err)
			}
			idx, next := e.GetIndex(), base+uint64(len(ents))+1
			if idx <= base || idx > next {
				return 0, 0, nil, nil, false, fmt.Errorf("%w: entry %d after log end %d (base %d)", ErrCorrupt, idx, next-1, base)
			}
			ents = append(ents[:idx-base-1], e)
		case kindHardState:
			h := &pb.HardState{}
			if err := proto.Unmarshal(r.data, h); err != nil {
				return 0, 0, nil, nil, false, fmt.Errorf("%w: hard state: %v", ErrCorrupt, err)
			}
			hs = h
		default:
			return 0, 0, nil, nil, false, fmt.Errorf("%w: log record kind %d", ErrCorrupt, r.kind)
		}
	}
	return base, baseTerm, ents, hs, false, nil
}

// HardState returns the last saved hard state.
func (s *Storage) HardState() *pb.HardState { return proto.Clone(s.hs).(*pb.HardState) }

// Save makes a Ready's snapshot, hard state and entries durable, in that
// order, then shows them to raft through the memory view. With mustSync
// false (only the commit index moved) the write is not fsynced: as in
// etcd, a lost commit index is recomputed from the quorum.
func (s *Storage) Save(hs *pb.HardState, ents []*pb.Entry, snap *pb.Snapshot, mustSync bool) error {
	if s.err != nil {
		return s.err
	}
	if !raft.IsEmptySnap(snap) {
		if err := s.saveSnapshot(snap, hs, ents); err != nil {
			s.err = err
			return err
		}
		return nil
	}
	var b []byte
	for _, e := range ents {
		data, err := proto.Marshal(e)
		if err != nil {
			return fmt.Errorf("quorum: marshal entry: %w", err)
		}
		b = appendRecord(b, kindEntry, data)
	}
	if !raft.IsEmptyHardState(hs) {
		data, err := proto.Marshal(hs)
		if err != nil {
			return fmt.Errorf("quorum: marshal hard state: %w", err)
		}
		b = appendRecord(b, kindHardState, data)
	}
	if len(b) == 0 {
		return nil
	}
	if _, err := s.f.Write(b); err != nil {
		s.err = fmt.Errorf("quorum: append log: %w", err)
		return s.err
	}
	if mustSync {
		if err := s.syncFile(s.f); err != nil {
			s.err = fmt.Errorf("quorum: sync log: %w", err)
			return s.err
		}
	}
	if err := s.MemoryStorage.Append(ents); err != nil {
		return err
	}
	if !raft.IsEmptyHardState(hs) {
		s.hs = proto.Clone(hs).(*pb.HardState)
		return s.MemoryStorage.SetHardState(s.hs)
	}
	return nil
}

// saveSnapshot stores a snapshot received from the leader: the snapshot
// file first, then a log holding only what follows it. A crash between the
// two leaves an older log, which Open reconciles with the snapshot.
func (s *Storage) saveSnapshot(snap *pb.Snapshot, hs *pb.HardState, ents []*pb.Entry) error {
	if err := s.writeSnapshotFile(snap); err != nil {
		return err
	}
	if !raft.IsEmptyHardState(hs) {
		s.hs = proto.Clone(hs).(*pb.HardState)
	}
	si, st := snap.GetMetadata().GetIndex(), snap.GetMetadata().GetTerm()
	var after []*pb.Entry
	for _, e := range ents {
		if e.GetIndex() > si {
			after = append(after, e)
		}
	}
	if err := s.rewriteLog(si, st, after); err != nil {
		return err
	}
	if err := s.MemoryStorage.ApplySnapshot(snap); err != nil {
		return fmt.Errorf("quorum: apply snapshot: %w", err)
	}
	s.snap = proto.Clone(snap).(*pb.Snapshot)
	if err := s.MemoryStorage.Append(after); err != nil {
		return err
	}
	return s.MemoryStorage.SetHardState(s.hs)
}

// CreateSnapshot stores a snapshot of the application at index applied
// with the application's data, then drops the log up to retain entries
// before it (kept so a follower slightly behind catches up from the log
// rather than a snapshot, as raftexample's snapshotCatchUpEntriesN).
func (s *Storage) CreateSnapshot(applied uint64, data []byte, retain uint64) error {
	if s.err != nil {
		return s.err
	}
	snap, err := s.MemoryStorage.CreateSnapshot(applied, s.confState(), data)
	if err != nil {
		return fmt.Errorf("quorum: create snapshot at %d: %w", applied, err)
	}
	if err := s.writeSnapshotFile(snap); err != nil {
		s.err = err
		return err
	}
	s.snap = snap
	first, _ := s.MemoryStorage.FirstIndex()
	if applied <= retain || applied-retain < first {
		return nil
	}
	compact := applied - retain
	term, err := s.MemoryStorage.Term(compact)
	if err != nil {
		return fmt.Errorf("quorum: term of %d: %w", compact, err)
	}
	last, _ := s.MemoryStorage.LastIndex()
	var ents []*pb.Entry
	if last > compact {
		if ents, err = s.MemoryStorage.Entries(compact+1, last+1, math.MaxUint64); err != nil {
			return fmt.Errorf("quorum: entries after %d: %w", compact, err)
		}
	}
	if err := s.rewriteLog(compact, term, ents); err != nil {
		return err
	}
	return s.MemoryStorage.Compact(compact)
}

func (s *Storage) writeSnapshotFile(snap *pb.Snapshot) error {
	data, err := proto.Marshal(snap)
	if err != nil {
		return fmt.Errorf("quorum: marshal snapshot: %w", err)
	}
	if len(data)+1 > maxRecordLen {
		return fmt.Errorf("quorum: snapshot of %d bytes exceeds %d", len(data), maxRecordLen)
	}
	if _, err := s.writeAtomic(snapshotFile, appendRecord(nil, kindSnapshot, data)); err != nil {
		s.err = err
		return err
	}
	return nil
}

// rewriteLog replaces the log file with one based at (base, term) holding
// the current hard state and ents, atomically.
func (s *Storage) rewriteLog(base, term uint64, ents []*pb.Entry) error {
	b := appendRecord(nil, kindBase, encodeBase(base, term))
	if !raft.IsEmptyHardState(s.hs) {
		data, err := proto.Marshal(s.hs)
		if err != nil {
			return fmt.Errorf("quorum: marshal hard state: %w", err)
		}
		b = appendRecord(b, kindHardState, data)
	}
	for _, e := range ents {
		data, err := proto.Marshal(e)
		if err != nil {
			return fmt.Errorf("quorum: marshal entry: %w", err)
		}
		b = appendRecord(b, kindEntry, data)
	}
	f, err := s.writeAtomic(logFile, b)
	if err != nil {
		s.err = err
		return err
	}
	if s.f != nil {
		s.f.Close()
	}
	s.f = f
	return nil
}

// writeAtomic writes b to name through a temporary file, fsyncs it,
// renames it into place and fsyncs the directory, so that name holds
// either its old or its new contents after a crash. It returns the new
// file open for appending.
func (s *Storage) writeAtomic(name string, b []byte) (*os.File, error) {
	tmp := s.path(name + tmpSuffix)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("quorum: create %s: %w", tmp, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("quorum: write %s: %w", tmp, err)
	}
	if err := s.syncFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("quorum: sync %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, s.path(name)); err != nil {
		f.Close()
		return nil, fmt.Errorf("quorum: rename %s: %w", tmp, err)
	}
	d, err := os.Open(s.dir)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("quorum: open %s: %w", s.dir, err)
	}
	err = s.syncFile(d)
	d.Close()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("quorum: sync %s: %w", s.dir, err)
	}
	return f, nil
}

func (s *Storage) syncFile(f *os.File) error {
	s.syncs++
	return s.sync(f)
}

// Close closes the log file.
func (s *Storage) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	if s.err == nil {
		s.err = errors.New("quorum: storage closed")
	}
	return err
}
