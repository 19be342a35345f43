package quorum

import (
	"errors"
	"fmt"
	"math"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// ErrNotLeader is returned (wrapped in a *NotLeaderError) for a proposal
// made to a node that is not the leader.
var ErrNotLeader = errors.New("quorum: not the leader")

// ErrLeadershipLost is returned for a proposal accepted by a leader that
// lost its leadership before the entry committed; the entry may or may not
// commit under the next leader, as with Kafka's NOT_CONTROLLER after a
// controller failover.
var ErrLeadershipLost = errors.New("quorum: leadership lost before the entry committed")

// ErrEmptyEntry is returned for a proposal without data: raft uses empty
// entries for a new leader's first entry, and the quorum hands only
// non-empty entries to the application.
var ErrEmptyEntry = errors.New("quorum: empty entry")

// ErrEntryTooLarge is returned for a proposal above MaxEntryBytes.
var ErrEntryTooLarge = errors.New("quorum: entry too large")

// ErrBusy is returned when the leader drops a proposal: it holds too many
// uncommitted bytes already, or is handing its leadership over.
var ErrBusy = errors.New("quorum: leader busy, proposal dropped")

// NotLeaderError names the leader a node knows of (0 when none).
type NotLeaderError struct {
	Leader uint64
	Term   uint64
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("quorum: not the leader (leader %d, term %d)", e.Leader, e.Term)
}

// Unwrap makes errors.Is(err, ErrNotLeader) hold.
func (e *NotLeaderError) Unwrap() error { return ErrNotLeader }

// Entry is one committed entry: its raft index and term and the data the
// leader's application proposed.
type Entry struct {
	Index uint64
	Term  uint64
	Data  []byte
}

// Snapshot is the application state at an index, as the application's
// Snapshot returned it.
type Snapshot struct {
	Index uint64
	Term  uint64
	Data  []byte
}

// Application is the state machine the quorum feeds. Its methods are
// called from one goroutine (Core.Advance's caller), never concurrently.
// The application is rebuilt on every open: first Restore with the stored
// snapshot (if any), then Apply with every committed entry after it.
type Application interface {
	// Restore replaces the application state with a snapshot's.
	Restore(s Snapshot) error
	// Apply applies committed entries, in index order.
	Apply(entries []Entry) error
	// Snapshot returns the state after the entries applied so far.
	Snapshot() ([]byte, error)
}

// Placed tells where an accepted proposal went in the leader's log.
type Placed struct {
	ID    uint64 // the id Core.Propose returned
	Index uint64
	Term  uint64
}

// Batch is what one Ready step made durable and releases: messages to send
// and, for the application, a snapshot to restore and committed entries.
type Batch struct {
	// Messages may be sent now: what they promise is durable.
	Messages []*pb.Message
	// Restore, when not nil, is applied before Committed.
	Restore *Snapshot
	// Committed are the committed entries with data, in index order.
	Committed []Entry
	// Applied is the index the application is at once this batch is
	// applied (empty entries included).
	Applied uint64
	// Placed are this node's proposals that entered the log.
	Placed []Placed
	// Dropped are proposal ids raft discarded before they entered the log
	// (the node stopped being leader in between).
	Dropped []uint64
	// Leader and Term are the node's view after this step.
	Leader, Term uint64
	// LeaderChanged reports that Leader or Term changed.
	LeaderChanged bool

	rd   raft.Ready
	live bool
}

type pending struct {
	id   uint64
	term uint64
}

// Core is one quorum member without goroutines, clock or network: the
// caller ticks it, steps it with received messages, proposes, and runs
// Ready, send, Advance. It owns a raft.RawNode (PreVote and CheckQuorum on,
// as KIP-996's pre-vote and Kafka's fetch-timeout resignation), the
// Storage, and the application callbacks.
type Core struct {
	cfg     Config
	rn      *raft.RawNode
	st      *Storage
	app     Application
	restore *Snapshot // the stored snapshot, released by the first Ready
	applied uint64
	snapIdx uint64
	// sinceSnap is the data applied since the last snapshot, for
	// SnapshotBytes.
	sinceSnap uint64
	nextID    uint64
	pending   []pending
	leader    uint64
	term      uint64
	inBatch   bool
	err       error // sticky: raft or storage failed
}

// NewCore opens the storage in cfg.Dir and starts raft on it.
func NewCore(cfg Config, app Application) (*Core, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st, err := OpenStorage(cfg.Dir, cfg.voterIDs())
	if err != nil {
		return nil, err
	}
	c, err := newCore(cfg, app, st)
	if err != nil {
		st.Close()
		return nil, err
	}
	return c, nil
}

func newCore(cfg Config, app Application, st *Storage) (*Core, error) {
	snap, err := st.MemoryStorage.Snapshot()
	if err != nil {
		return nil, err
	}
	si := snap.GetMetadata().GetIndex()
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        cfg.NodeID,
		ElectionTick:              cfg.Timing.ElectionTick,
		HeartbeatTick:             cfg.Timing.HeartbeatTick,
		Storage:                   st,
		Applied:                   si,
		MaxSizePerMsg:             cfg.MaxSizePerMsg,
		MaxInflightMsgs:           cfg.MaxInflightMsgs,
		MaxUncommittedEntriesSize: 64 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		// A follower refuses proposals rather than forwarding them, so a
		// proposal is only ever placed by the node it was made to.
		DisableProposalForwarding: true,
		Logger:                    raftLogger{cfg.Logger.With("node", cfg.NodeID)},
	})
	if err != nil {
		return nil, fmt.Errorf("quorum: start raft: %w", err)
	}
	c := &Core{cfg: cfg, rn: rn, st: st, app: app, applied: si, snapIdx: si}
	if si > 0 {
		c.restore = &Snapshot{Index: si, Term: snap.GetMetadata().GetTerm(), Data: snap.GetData()}
	}
	return c, nil
}

// Storage returns the core's storage.
func (c *Core) Storage() *Storage { return c.st }

// Tick advances raft's logical clock by one tick.
func (c *Core) Tick() { c.rn.Tick() }

// Step hands raft a message from a peer. Messages raft reserves for the
// local node are refused.
func (c *Core) Step(m *pb.Message) error {
	if raft.IsLocalMsg(m.GetType()) {
		return fmt.Errorf("quorum: local message %v from the network", m.GetType())
	}
	if _, ok := c.cfg.Voters[m.GetFrom()]; !ok {
		return fmt.Errorf("quorum: message from non-voter %d", m.GetFrom())
	}
	if m.GetTo() != c.cfg.NodeID {
		return fmt.Errorf("quorum: message for %d delivered to %d", m.GetTo(), c.cfg.NodeID)
	}
	err := c.rn.Step(m)
	if errors.Is(err, raft.ErrStepPeerNotFound) {
		return nil // a response from a peer raft does not track: harmless
	}
	return err
}

// Propose offers data for the log. It returns an id that a later Batch
// reports in Placed (with the entry's index and term) or Dropped.
func (c *Core) Propose(data []byte) (uint64, error) {
	if len(data) == 0 {
		return 0, ErrEmptyEntry
	}
	if len(data) > MaxEntryBytes {
		return 0, fmt.Errorf("%w: %d bytes, at most %d", ErrEntryTooLarge, len(data), MaxEntryBytes)
	}
	st := c.rn.BasicStatus()
	if st.RaftState != raft.StateLeader {
		return 0, &NotLeaderError{Leader: st.Lead, Term: st.GetTerm()}
	}
	if err := c.rn.Propose(data); err != nil {
		if errors.Is(err, raft.ErrProposalDropped) {
			if now := c.rn.BasicStatus(); now.RaftState != raft.StateLeader {
				return 0, &NotLeaderError{Leader: now.Lead, Term: now.GetTerm()}
			}
			return 0, ErrBusy
		}
		return 0, err
	}
	c.nextID++
	c.pending = append(c.pending, pending{id: c.nextID, term: st.GetTerm()})
	return c.nextID, nil
}

// Campaign makes the node start an election now (tests and tools).
func (c *Core) Campaign() error { return c.rn.Campaign() }

// Leader returns the leader this node knows of and its term.
func (c *Core) Leader() (id, term uint64) {
	st := c.rn.BasicStatus()
	return st.Lead, st.GetTerm()
}

// Status returns raft's status.
func (c *Core) Status() raft.BasicStatus { return c.rn.BasicStatus() }

// ReportUnreachable tells raft a message to id was lost.
func (c *Core) ReportUnreachable(id uint64) { c.rn.ReportUnreachable(id) }

// ReportSnapshot tells raft whether a snapshot reached id.
func (c *Core) ReportSnapshot(id uint64, ok bool) {
	status := raft.SnapshotFinish
	if !ok {
		status = raft.SnapshotFailure
	}
	c.rn.ReportSnapshot(id, status)
}

// Ready runs one Ready step: it makes the snapshot, hard state and entries
// durable (fsync) and only then returns them with the messages that may be
// sent and the entries the application may apply. The caller sends
// b.Messages and then calls Advance(b); ok is false when there is nothing
// to do.
func (c *Core) Ready() (b Batch, ok bool, err error) {
	if c.err != nil {
		return Batch{}, false, c.err
	}
	if c.inBatch {
		return Batch{}, false, errors.New("quorum: Ready called before Advance")
	}
	b.Restore, c.restore = c.restore, nil
	if c.rn.HasReady() {
		rd := c.rn.Ready()
		if err := c.st.Save(rd.HardState, rd.Entries, rd.Snapshot, rd.MustSync); err != nil {
			c.err = err
			return Batch{}, false, err
		}
		b.rd, b.live = rd, true
		b.Messages = rd.Messages
		if !raft.IsEmptySnap(rd.Snapshot) {
			md := rd.Snapshot.GetMetadata()
			b.Restore = &Snapshot{Index: md.GetIndex(), Term: md.GetTerm(), Data: rd.Snapshot.GetData()}
		}
		c.place(&b, rd.Entries)
		b.Applied = c.applied
		for _, e := range rd.CommittedEntries {
			b.Applied = e.GetIndex()
			if e.GetType() == pb.EntryNormal && len(e.GetData()) > 0 {
				b.Committed = append(b.Committed, Entry{Index: e.GetIndex(), Term: e.GetTerm(), Data: e.GetData()})
			}
		}
	} else {
		b.Applied = c.applied
	}
	if b.Restore != nil && b.Restore.Index > b.Applied {
		b.Applied = b.Restore.Index
	}
	st := c.rn.BasicStatus()
	b.Leader, b.Term = st.Lead, st.GetTerm()
	b.LeaderChanged = b.Leader != c.leader || b.Term != c.term
	c.leader, c.term = b.Leader, b.Term
	if !b.live && b.Restore == nil && !b.LeaderChanged {
		return Batch{}, false, nil
	}
	c.inBatch = true
	return b, true, nil
}

// place matches the proposals made since the last Ready with the entries
// this Ready appends. Only a leader appends entries of its own term, one
// per accepted proposal in order (besides its empty first entry), and
// every entry raft appended is in the next Ready; so a pending proposal
// not found here was discarded.
func (c *Core) place(b *Batch, ents []*pb.Entry) {
	for _, e := range ents {
		if len(c.pending) == 0 {
			break
		}
		if e.GetType() == pb.EntryNormal && len(e.GetData()) > 0 && e.GetTerm() == c.pending[0].term {
			b.Placed = append(b.Placed, Placed{ID: c.pending[0].id, Index: e.GetIndex(), Term: e.GetTerm()})
			c.pending = c.pending[1:]
		}
	}
	for _, p := range c.pending {
		b.Dropped = append(b.Dropped, p.id)
	}
	c.pending = c.pending[:0]
}

// Advance applies the batch to the application (Restore, then Apply),
// tells raft the batch is done, and takes a snapshot once SnapshotEntries
// entries were applied since the last one.
func (c *Core) Advance(b Batch) error {
	if !c.inBatch {
		return errors.New("quorum: Advance without Ready")
	}
	c.inBatch = false
	if b.Restore != nil {
		if err := c.app.Restore(*b.Restore); err != nil {
			c.err = fmt.Errorf("quorum: restore snapshot at %d: %w", b.Restore.Index, err)
			return c.err
		}
		c.snapIdx = max(c.snapIdx, b.Restore.Index)
		c.sinceSnap = 0
	}
	for _, e := range b.Committed {
		c.sinceSnap += uint64(len(e.Data))
	}
	if len(b.Committed) > 0 {
		if err := c.app.Apply(b.Committed); err != nil {
			c.err = fmt.Errorf("quorum: apply entries %d-%d: %w", b.Committed[0].Index, b.Committed[len(b.Committed)-1].Index, err)
			return c.err
		}
	}
	c.applied = max(c.applied, b.Applied)
	if b.live {
		c.rn.Advance(b.rd)
	}
	bytesDue := c.cfg.SnapshotBytes > 0 && c.sinceSnap >= c.cfg.SnapshotBytes && c.applied > c.snapIdx
	if c.applied-c.snapIdx >= c.cfg.SnapshotEntries || bytesDue {
		data, err := c.app.Snapshot()
		if err != nil {
			c.err = fmt.Errorf("quorum: application snapshot at %d: %w", c.applied, err)
			return c.err
		}
		if err := c.st.CreateSnapshot(c.applied, data, c.retain()); err != nil {
			c.err = err
			return err
		}
		c.snapIdx, c.sinceSnap = c.applied, 0
	}
	return nil
}

// retain returns how many entries before the snapshot at c.applied stay in
// the log: RetainEntries, fewer when RetainBytes bounds their data.
func (c *Core) retain() uint64 {
	n := c.cfg.RetainEntries
	if c.cfg.RetainBytes == 0 || n == 0 {
		return n
	}
	first, _ := c.st.FirstIndex()
	lo := first
	if c.applied >= n && c.applied-n+1 > lo {
		lo = c.applied - n + 1
	}
	if lo > c.applied {
		return n
	}
	ents, err := c.st.Entries(lo, c.applied+1, math.MaxUint64)
	if err != nil {
		return n // compacted meanwhile: CreateSnapshot keeps what it can
	}
	var size, kept uint64
	for i := len(ents) - 1; i >= 0; i-- {
		size += uint64(len(ents[i].GetData()))
		if size > c.cfg.RetainBytes {
			break
		}
		kept++
	}
	return kept
}

// Close closes the storage. The core is unusable afterwards.
func (c *Core) Close() error {
	c.err = errors.New("quorum: closed")
	return c.st.Close()
}
