package metadata

import (
	cryptorand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"sync"
	"sync/atomic"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/metadata/journal"
)

// DirName is the metadata log's directory inside the first log dir, named
// as Kafka's __cluster_metadata-0. Scans of a log dir for partition
// directories must skip it.
const DirName = "__cluster_metadata-0"

// Journal is the durable log under a Store: a local file today
// (journal.File), a Raft log in a cluster.
type Journal interface {
	// Replay calls fn with every committed batch in order.
	Replay(fn func(batch []byte) error) error
	// Append makes one batch durable before returning.
	Append(batch []byte) error
	Close() error
}

// Rewriter is implemented by a Journal that can replace its contents with a
// snapshot (compaction).
type Rewriter interface {
	Rewrite(batches [][]byte) error
	Size() int64
}

// Options configures a Store.
type Options struct {
	// Broker supplies topic defaults (num.partitions, ...), node.id and
	// cluster.id. Nil means config.Default().
	Broker *config.Broker
	// Rand is the source of topic ids and a generated cluster id; nil means
	// crypto/rand.
	Rand io.Reader
	// Logger receives recovery notices; nil means slog.Default().
	Logger *slog.Logger
}

// Store owns the metadata log and its latest image. Writes are serialised
// and each is durable before the new image is published and subscribers run;
// reads (Image) never block.
type Store struct {
	opts    Options
	journal Journal // nil for a replica store (NewReplica)
	writer  Writer  // a replica store's writes; nil for a journal store
	img     atomic.Pointer[Image]

	mu     sync.Mutex // serialises commits and subscriber calls
	subs   map[int]func(prev, next *Image)
	nextID int
	closed bool

	placement *rand.Rand // replica placement; one node makes it moot, but Place needs one

	pidMu            sync.Mutex
	pidNext, pidStop int64 // the unused rest of the current block
}

// Open opens (or formats) the metadata log in dir, replays it and returns
// the store. dir is normally filepath.Join(logDirs[0], DirName).
func Open(dir string, opts Options) (*Store, error) {
	j, err := journal.Open(dir)
	if err != nil {
		return nil, err
	}
	s, err := New(j, opts)
	if err != nil {
		j.Close()
		return nil, err
	}
	if j.Truncated > 0 {
		s.opts.Logger.Warn("metadata log had a torn tail; truncated", "dir", dir, "bytes", j.Truncated)
	}
	return s, nil
}

// New replays j and returns a store writing to it. A new (empty) log is
// formatted with a cluster id record: Broker.ClusterID if set, else a random
// one. An existing log whose cluster id differs from a set Broker.ClusterID
// is refused.
func New(j Journal, opts Options) (*Store, error) {
	if opts.Broker == nil {
		opts.Broker = config.Default()
	}
	if opts.Rand == nil {
		opts.Rand = cryptorand.Reader
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	img := Empty()
	batches := 0
	err := j.Replay(func(b []byte) error {
		recs, err := DecodeBatch(b)
		if err != nil {
			return fmt.Errorf("metadata: batch %d: %w", batches, err)
		}
		next, err := Apply(img, recs)
		if err != nil {
			return fmt.Errorf("metadata: batch %d: %w", batches, err)
		}
		img = next
		batches++
		return nil
	})
	if err != nil {
		return nil, err
	}
	s := &Store{opts: opts, journal: j, subs: map[int]func(prev, next *Image){},
		placement: rand.New(rand.NewSource(1))}
	s.img.Store(img)
	want := opts.Broker.ClusterID
	switch {
	case img.ClusterID == "":
		id := want
		if id == "" {
			u, err := newUUID(opts.Rand)
			if err != nil {
				return nil, err
			}
			id = base64.RawURLEncoding.EncodeToString(u[:])
		}
		if err := s.commit([]Record{ClusterIDRecord{ClusterID: id}, FeatureLevelRecord{Name: "metadata.version", Level: MetadataVersion}}); err != nil {
			return nil, err
		}
	case want != "" && want != img.ClusterID:
		return nil, fmt.Errorf("metadata: cluster.id %s does not match the cluster id %s stored in the metadata log", want, img.ClusterID)
	}
	if err := s.maybeCompact(batches); err != nil {
		return nil, err
	}
	return s, nil
}

// MetadataVersion is the metadata.version feature level Cascade reports
// (Kafka 4.0's 4.0-IV3 is 25).
const MetadataVersion int16 = 25

// compactAfter is the number of replayed batches beyond the image's own size
// above which Open rewrites the log as a snapshot.
const compactAfter = 1000

// maybeCompact rewrites the journal as one snapshot batch when its history
// is much longer than the image.
func (s *Store) maybeCompact(batches int) error {
	rw, ok := s.journal.(Rewriter)
	if !ok || batches < compactAfter {
		return nil
	}
	img := s.img.Load()
	snap := EncodeBatch(img.Records())
	if int64(len(snap))*4 > rw.Size() {
		return nil // not worth it
	}
	if err := rw.Rewrite([][]byte{snap}); err != nil {
		return fmt.Errorf("metadata: compacting: %w", err)
	}
	return nil
}

// planner plans operations on this single-node cluster. Called with s.mu
// held, which also serialises use of s.placement.
func (s *Store) planner() *Planner {
	b := s.opts.Broker
	return &Planner{Broker: b, NumPartitions: b.NumPartitions, ReplicationFactor: b.DefaultReplicationFactor,
		Cluster: SingleNode(b.NodeID), IDs: s.opts.Rand, Placement: s.placement}
}

// Image returns the latest committed image.
func (s *Store) Image() *Image { return s.img.Load() }

// Broker returns the broker configuration the store was opened with.
func (s *Store) Broker() *config.Broker { return s.opts.Broker }

// Subscribe calls fn(Empty(), current) at once, then fn(prev, next) after
// every commit, in commit order, from the committing goroutine while the
// store's write lock is held: fn must be quick and must not write to the
// store. Subscribers of one commit are called in the order they
// subscribed, so one that subscribed after the partition manager finds the
// partitions of next already opened. The partition manager uses it to create, delete and reconfigure
// logs (see Diff). The returned func cancels the subscription.
func (s *Store) Subscribe(fn func(prev, next *Image)) (cancel func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextID
	s.nextID++
	s.subs[id] = fn
	fn(Empty(), s.img.Load())
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.subs, id)
	}
}

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("metadata: store closed")

// commit makes recs durable as one batch, then publishes the new image and
// notifies subscribers. Callers build recs from the current image while
// holding s.mu (see the ops), so validation and commit are atomic.
func (s *Store) commit(recs []Record) error {
	prev := s.img.Load()
	next, err := Apply(prev, recs)
	if err != nil {
		return err // a bug in the caller: nothing written
	}
	if s.closed {
		return ErrClosed
	}
	if err := s.journal.Append(EncodeBatch(recs)); err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	s.publishLocked(prev, next)
	return nil
}

// Close closes the journal; later writes fail with ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.journal == nil {
		return nil
	}
	return s.journal.Close()
}

// producerIDBlock is how many ids one durable reservation covers, as
// Kafka's ProducerIdManager blocks of 1000.
const producerIDBlock = 1000

// AllocateProducerIDs durably reserves n consecutive producer ids and
// returns the first. The reservation is committed before it returns, so an
// id is never handed out twice, even across restarts.
func (s *Store) AllocateProducerIDs(n int) (int64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("metadata: allocating %d producer ids", n)
	}
	if s.writer != nil {
		return 0, fmt.Errorf("metadata: a replica store allocates producer ids in the controller's blocks")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.img.Load().NextProducerID
	if first > (1<<63-1)-int64(n) {
		return 0, fmt.Errorf("metadata: producer ids exhausted")
	}
	rec := ProducerIDsRecord{BrokerID: s.opts.Broker.NodeID, BrokerEpoch: 0, NextProducerID: first + int64(n)}
	if err := s.commit([]Record{rec}); err != nil {
		return 0, err
	}
	return first, nil
}

// NextProducerID returns one fresh producer id for InitProducerId. Ids come
// from blocks of 1000 reserved with AllocateProducerIDs; ids of a block
// unused at a restart are skipped, never reused.
func (s *Store) NextProducerID() (int64, error) {
	s.pidMu.Lock()
	defer s.pidMu.Unlock()
	if s.pidNext == s.pidStop && s.writer != nil {
		first, size, err := s.writer.AllocateProducerIDs()
		if err != nil {
			return 0, err
		}
		s.pidNext, s.pidStop = first, first+size
	}
	if s.pidNext == s.pidStop {
		first, err := s.AllocateProducerIDs(producerIDBlock)
		if err != nil {
			return 0, err
		}
		s.pidNext, s.pidStop = first, first+producerIDBlock
	}
	id := s.pidNext
	s.pidNext++
	return id, nil
}
