package quorum

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

// durableView opens what of dir survives a power loss: the snapshot file
// (replaced only by an fsynced rename) and the log up to its last fsync.
func durableView(t *testing.T, dir string, syncedLog int64) *Storage {
	t.Helper()
	view := t.TempDir()
	if b, err := os.ReadFile(filepath.Join(dir, snapshotFile)); err == nil {
		os.WriteFile(filepath.Join(view, snapshotFile), b, 0o644)
	}
	b, err := os.ReadFile(filepath.Join(dir, logFile))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(view, logFile), b[:min(int64(len(b)), syncedLog)], 0o644)
	s, err := OpenStorage(view, testVoters)
	if err != nil {
		t.Fatalf("durable view of %s: %v", dir, err)
	}
	return s
}

func hasEntry(s *Storage, index, term uint64) bool {
	t, err := s.Term(index)
	return err == nil && t == term
}

// TestCorePersistsBeforeRelease checks, for every batch a Ready returns,
// that what its messages promise (votes, appended and acknowledged
// entries) and the committed entries it releases are already in the
// fsynced part of the node's files.
func TestCorePersistsBeforeRelease(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synced := map[uint64]int64{}
			s := newSimWith(t, seed, 3, t.TempDir(), func(s *sim) {
				s.syncHook = func(n *simNode, f *os.File) error {
					if base := filepath.Base(f.Name()); base == logFile || base == logFile+tmpSuffix {
						info, err := f.Stat()
						if err != nil {
							return err
						}
						synced[n.id] = info.Size()
					}
					return f.Sync()
				}
			})
			checked := 0
			s.onReady = func(n *simNode, b Batch) {
				d := durableView(t, n.cfg.Dir, synced[n.id])
				defer d.Close()
				hs := d.HardState()
				snap, _ := d.Snapshot()
				si := snap.GetMetadata().GetIndex()
				durable := func(index, term uint64) bool { return index <= si || hasEntry(d, index, term) }
				for _, m := range b.Messages {
					checked++
					switch m.GetType() {
					case pb.MsgVote:
						if hs.GetTerm() != m.GetTerm() || hs.GetVote() != n.id {
							s.fail("node %d asks votes for term %d with durable %v", n.id, m.GetTerm(), hs)
						}
					case pb.MsgVoteResp:
						if !m.GetReject() && (hs.GetTerm() != m.GetTerm() || hs.GetVote() != m.GetTo()) {
							s.fail("node %d grants %d term %d with durable %v", n.id, m.GetTo(), m.GetTerm(), hs)
						}
					case pb.MsgApp:
						for _, e := range m.GetEntries() {
							if !durable(e.GetIndex(), e.GetTerm()) {
								s.fail("node %d sends entry %d@%d before it is durable", n.id, e.GetIndex(), e.GetTerm())
							}
						}
					case pb.MsgAppResp:
						if last, _ := d.LastIndex(); !m.GetReject() && last < m.GetIndex() {
							s.fail("node %d acknowledges %d with %d durable", n.id, m.GetIndex(), last)
						}
					}
					if m.GetType() != pb.MsgPreVote && m.GetType() != pb.MsgPreVoteResp && m.GetTerm() > hs.GetTerm() {
						s.fail("node %d sends %v of term %d with durable term %d", n.id, m.GetType(), m.GetTerm(), hs.GetTerm())
					}
				}
				for _, e := range b.Committed {
					if !durable(e.Index, e.Term) {
						s.fail("node %d releases committed %d@%d before it is durable", n.id, e.Index, e.Term)
					}
				}
			}
			s.run(40, 0.2)
			l, _ := s.leader()
			s.crash(l)
			s.run(40, 0.2)
			s.restart(l)
			s.run(40, 0.2)
			if s.err != nil {
				t.Fatal(s.err)
			}
			if len(s.committed) < 5 || checked < 100 {
				t.Fatalf("only %d entries committed and %d messages checked", len(s.committed), checked)
			}
			if _, ok := s.leader(); !ok {
				t.Fatal("no leader at the end")
			}
		})
	}
}
