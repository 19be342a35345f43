package quorum

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"
)

// ObserverConfig configures an Observer.
type ObserverConfig struct {
	// NodeID is the observer's node.id; it must not be a voter.
	NodeID int32
	// Voters maps each voter's id to its controller-listener address.
	Voters    map[uint64]string
	ClusterID string
	// MaxBytes bounds the entries of one answer (a larger first entry
	// still comes); zero means 1 MiB.
	MaxBytes int32
	// MaxWait is how long a voter holds a fetch with nothing new; zero
	// means 500 ms.
	MaxWait time.Duration
	// RequestTimeout bounds a dial and, beyond MaxWait, an answer; zero
	// means 2 s.
	RequestTimeout time.Duration
	// Backoff is the pause after a voter failed before the next one is
	// tried; zero means 50 ms.
	Backoff time.Duration
	// Dial, when set, opens the connections to the voters; nil means a
	// net.Dialer. RequestTimeout bounds each dial through its context.
	Dial   func(ctx context.Context, network, address string) (net.Conn, error)
	Logger *slog.Logger
}

// Observer follows the committed metadata log without voting, as a Kafka
// broker-only node follows __cluster_metadata: one goroutine fetches from
// the leader it knows (any voter while it knows none, or when the leader
// does not answer), hands what comes to the Application (Restore for a
// snapshot, Apply for entries, in index order, from that goroutine only)
// and learns the leader and term from each answer. It keeps nothing on
// disk: a restarted observer fetches from the start, or from the voters'
// latest snapshot once their log is compacted.
type Observer struct {
	cfg ObserverConfig
	app Application
	ids []uint64 // voter ids, sorted

	ctx    context.Context
	cancel context.CancelFunc
	donec  chan struct{}

	mu       sync.Mutex
	leader   uint64
	term     uint64
	changed  chan struct{}
	applied  uint64
	commit   uint64
	caughtUp chan struct{}
	caught   bool
	err      error
}

// StartObserver starts following the voters of cfg.
func StartObserver(cfg ObserverConfig, app Application) (*Observer, error) {
	if len(cfg.Voters) == 0 {
		return nil, errors.New("quorum: an observer needs voters")
	}
	if _, ok := cfg.Voters[uint64(cfg.NodeID)]; ok || cfg.NodeID < 0 {
		return nil, fmt.Errorf("quorum: node %d is a voter, not an observer", cfg.NodeID)
	}
	if cfg.ClusterID == "" || len(cfg.ClusterID) > maxClusterIDLen {
		return nil, fmt.Errorf("quorum: cluster id %q must have 1 to %d bytes", cfg.ClusterID, maxClusterIDLen)
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 1 << 20
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	cfg.MaxWait = min(cfg.MaxWait, MaxObserverWait)
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 2 * time.Second
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 50 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	o := &Observer{cfg: cfg, app: app, donec: make(chan struct{}), changed: make(chan struct{}), caughtUp: make(chan struct{})}
	for id := range cfg.Voters {
		o.ids = append(o.ids, id)
	}
	slices.Sort(o.ids)
	o.ctx, o.cancel = context.WithCancel(context.Background())
	go o.run()
	return o, nil
}

// Leader returns the leader and term the last answer named (0 when no
// leader is known).
func (o *Observer) Leader() (id, term uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.leader, o.term
}

// LeaderChanged returns a channel closed at the next change of Leader().
func (o *Observer) LeaderChanged() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

// Applied returns the index the application has reached.
func (o *Observer) Applied() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.applied
}

// CaughtUp is closed once the application has reached the commit index of
// an answer, that is, held all that was committed when the observer began.
func (o *Observer) CaughtUp() <-chan struct{} { return o.caughtUp }

// Done is closed when the observer has stopped.
func (o *Observer) Done() <-chan struct{} { return o.donec }

// Err returns why the observer stopped on its own (the application
// refused what was committed), or nil.
func (o *Observer) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Close stops the observer and waits for its goroutine.
func (o *Observer) Close() error {
	o.cancel()
	<-o.donec
	return nil
}

// observerConn is the connection to one voter.
type observerConn struct {
	id   uint64
	conn net.Conn
	r    *bufio.Reader
	corr int32
}

func (o *Observer) run() {
	defer close(o.donec)
	var c *observerConn
	defer func() {
		if c != nil {
			c.conn.Close()
		}
	}()
	next := uint64(1)
	rotate := 0
	for o.ctx.Err() == nil {
		want := o.target(&rotate)
		if c != nil && c.id != want {
			c.conn.Close()
			c = nil
		}
		if c == nil {
			conn, err := dialTCP(o.ctx, o.cfg.Dial, o.cfg.Voters[want], o.cfg.RequestTimeout)
			if err != nil {
				o.failed(want, &rotate, err)
				continue
			}
			c = &observerConn{id: want, conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
		}
		resp, err := o.fetch(c, next)
		if err != nil {
			c.conn.Close()
			c = nil
			o.failed(want, &rotate, err)
			continue
		}
		if next, err = o.apply(resp, next); err != nil {
			o.mu.Lock()
			o.err = err
			o.mu.Unlock()
			o.cfg.Logger.Error("observer stopped: the application refused committed metadata", "err", err)
			return
		}
	}
}

// target is the voter to fetch from: the leader when one is known, else
// the voters in turn.
func (o *Observer) target(rotate *int) uint64 {
	if l, _ := o.Leader(); l != 0 {
		if _, ok := o.cfg.Voters[l]; ok {
			return l
		}
	}
	return o.ids[*rotate%len(o.ids)]
}

// failed forgets a leader that does not answer, so the next fetch goes to
// another voter, and pauses briefly.
func (o *Observer) failed(id uint64, rotate *int, err error) {
	if o.ctx.Err() != nil {
		return
	}
	o.cfg.Logger.Debug("observer fetch failed", "voter", id, "err", err)
	o.mu.Lock()
	if o.leader == id {
		o.setLeaderLocked(0, o.term)
	}
	o.mu.Unlock()
	if i := slices.Index(o.ids, id); i >= 0 {
		*rotate = i + 1
	} else {
		*rotate++
	}
	select {
	case <-o.ctx.Done():
	case <-time.After(o.cfg.Backoff):
	}
}

func (o *Observer) setLeaderLocked(id, term uint64) {
	if id == o.leader && term == o.term {
		return
	}
	o.leader, o.term = id, term
	close(o.changed)
	o.changed = make(chan struct{})
}

// fetch sends one fetch on c and reads its answer.
func (o *Observer) fetch(c *observerConn, next uint64) (ObserverFetchResponse, error) {
	c.corr++
	frame := AppendObserverFetch(nil, c.corr, ObserverFetchRequest{ClusterID: o.cfg.ClusterID, NodeID: o.cfg.NodeID,
		Next: next, MaxBytes: o.cfg.MaxBytes, MaxWait: o.cfg.MaxWait})
	c.conn.SetDeadline(time.Now().Add(o.cfg.MaxWait + o.cfg.RequestTimeout))
	if _, err := c.conn.Write(frame); err != nil {
		return ObserverFetchResponse{}, err
	}
	// Stop waiting at once when the observer is closed.
	stop := context.AfterFunc(o.ctx, func() { c.conn.SetDeadline(time.Now()) })
	defer stop()
	b, err := readAnswerFrame(c.r)
	if err != nil {
		return ObserverFetchResponse{}, err
	}
	corr, resp, err := parseObserverAnswer(b)
	if err != nil {
		return ObserverFetchResponse{}, err
	}
	if corr != c.corr {
		return ObserverFetchResponse{}, fmt.Errorf("%w: correlation id %d, want %d", ErrObserverFrame, corr, c.corr)
	}
	return resp, nil
}

// readAnswerFrame reads one size-prefixed answer; an answer is at least a
// correlation id and the fixed header.
func readAnswerFrame(r *bufio.Reader) ([]byte, error) {
	b, err := ReadFrame(r, DefaultMaxFrameBytes)
	if errors.Is(err, ErrFrame) {
		err = fmt.Errorf("%w: %v", ErrObserverFrame, err)
	}
	return b, err
}

// apply hands an answer to the application and returns the next index to
// fetch. An answer that does not continue from next (a snapshot aside) is
// refused: the voter would be serving another history.
func (o *Observer) apply(resp ObserverFetchResponse, next uint64) (uint64, error) {
	o.mu.Lock()
	if resp.Term > o.term || resp.Term == o.term && resp.Leader != 0 {
		o.setLeaderLocked(resp.Leader, resp.Term)
	}
	o.mu.Unlock()
	if s := resp.Snapshot; s != nil {
		if err := o.app.Restore(*s); err != nil {
			return next, fmt.Errorf("quorum: observer restoring the snapshot at %d: %w", s.Index, err)
		}
		next = s.Index + 1
		o.setApplied(s.Index, resp.Commit)
		o.cfg.Logger.Info("observer restored a snapshot: its next index was below the voter's log start",
			"snapshot.index", s.Index, "snapshot.term", s.Term, "bytes", len(s.Data))
	}
	if len(resp.Entries) > 0 {
		if resp.Entries[0].Index < next {
			return next, fmt.Errorf("quorum: voter sent entry %d to an observer at %d", resp.Entries[0].Index, next)
		}
		if err := o.app.Apply(resp.Entries); err != nil {
			return next, fmt.Errorf("quorum: observer applying entries %d-%d: %w", resp.Entries[0].Index, resp.Entries[len(resp.Entries)-1].Index, err)
		}
	}
	if resp.Next > next {
		next = resp.Next
	}
	o.setApplied(next-1, resp.Commit)
	return next, nil
}

func (o *Observer) setApplied(applied, commit uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.applied = max(o.applied, applied)
	o.commit = max(o.commit, commit)
	if !o.caught && o.applied >= o.commit {
		o.caught = true
		close(o.caughtUp)
	}
}
