package quorum

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Kafka's defaults for the quorum timing keys.
const (
	// DefaultElectionTimeoutMs is controller.quorum.election.timeout.ms.
	DefaultElectionTimeoutMs = 1000
	// DefaultFetchTimeoutMs is controller.quorum.fetch.timeout.ms.
	DefaultFetchTimeoutMs = 2000
	// DefaultTickInterval is the raft tick Cascade uses.
	DefaultTickInterval = 100 * time.Millisecond
)

// Timing is raft's clock derived from Kafka's quorum timeouts.
type Timing struct {
	TickInterval  time.Duration
	ElectionTick  int
	HeartbeatTick int
}

// TimingFromKafka maps controller.quorum.election.timeout.ms and
// controller.quorum.fetch.timeout.ms onto raft ticks of tick.
//
// In Kafka's KafkaRaftClient a follower that hears nothing from the leader
// for the fetch timeout becomes a candidate, and a candidate retries after
// a randomised backoff bounded by the election timeout. etcd raft has one
// knob: a follower campaigns after a random timeout in
// [ElectionTick, 2*ElectionTick) ticks, and with CheckQuorum a leader that
// has not heard from a majority for ElectionTick ticks steps down. The
// mapping makes the randomised follower timeout span [fetch/2, fetch), so
// that with Kafka's defaults (1000 and 2000 ms) a leader is suspected after
// 1-2 s, the same window as Kafka's (a new leader in Kafka appears after
// fetch.timeout.ms plus an election); ElectionTick = fetch/2/tick. The
// election timeout bounds how long a split vote lasts, which in raft is the
// same randomised timeout, so it must not exceed fetch/2. The leader
// heartbeats every ElectionTick/10 ticks (100 ms by default), in place of
// Kafka's followers fetching continuously.
func TimingFromKafka(electionTimeoutMs, fetchTimeoutMs int, tick time.Duration) (Timing, error) {
	if tick <= 0 {
		return Timing{}, fmt.Errorf("quorum: tick interval %v must be positive", tick)
	}
	if electionTimeoutMs <= 0 || fetchTimeoutMs <= 0 {
		return Timing{}, fmt.Errorf("quorum: controller.quorum.election.timeout.ms (%d) and controller.quorum.fetch.timeout.ms (%d) must be positive", electionTimeoutMs, fetchTimeoutMs)
	}
	if electionTimeoutMs > fetchTimeoutMs/2 {
		return Timing{}, fmt.Errorf("quorum: controller.quorum.election.timeout.ms (%d) above half of controller.quorum.fetch.timeout.ms (%d) is not supported: raft has one randomised timeout", electionTimeoutMs, fetchTimeoutMs)
	}
	et := int(time.Duration(fetchTimeoutMs/2) * time.Millisecond / tick)
	if et < 2 {
		return Timing{}, fmt.Errorf("quorum: controller.quorum.fetch.timeout.ms %d gives %d ticks of %v; need at least 2", fetchTimeoutMs, et, tick)
	}
	return Timing{TickInterval: tick, ElectionTick: et, HeartbeatTick: max(1, et/10)}, nil
}

// Ticker is the clock the run loop ticks from; NewTicker returns a
// channel of ticks and a function that stops it.
type Ticker func(d time.Duration) (<-chan time.Time, func())

// RealTicker is a Ticker backed by time.NewTicker.
func RealTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// MaxEntryBytes bounds the data of one proposal, as Kafka's
// KafkaRaftClient bounds a metadata batch (MAX_BATCH_SIZE_BYTES, 8 MiB).
// It stays well under DefaultMaxFrameBytes so that every entry fits in a
// frame: an entry no frame could carry would stall replication for good.
const MaxEntryBytes = 8 << 20

// Config configures one quorum member.
type Config struct {
	// NodeID is Kafka's node.id; it is the raft id and must be a voter.
	NodeID uint64
	// Voters maps each voter's node id to its controller-listener address,
	// from controller.quorum.voters.
	Voters map[uint64]string
	// Dir is the durable directory, normally
	// <log.dirs[0]>/__cluster_metadata-0/raft.
	Dir string
	// ClusterID is carried by every message; messages of another cluster
	// are refused.
	ClusterID string
	// Timing is raft's clock; see TimingFromKafka. Zero means Kafka's
	// defaults with DefaultTickInterval.
	Timing Timing
	// SnapshotEntries is how many applied entries trigger a snapshot;
	// zero means 10000.
	SnapshotEntries uint64
	// RetainEntries is how many entries before a snapshot stay in the log
	// for followers that are only slightly behind; zero means
	// SnapshotEntries/10.
	RetainEntries uint64
	// MaxSizePerMsg bounds the entries in one append message; zero means
	// 1 MiB.
	MaxSizePerMsg uint64
	// MaxInflightMsgs bounds unacknowledged appends per follower; zero
	// means 256.
	MaxInflightMsgs int
	// Logger receives the raft library's log; nil means slog.Default().
	Logger *slog.Logger
	// Ticker drives the run loop; nil means RealTicker. Core ignores it.
	Ticker Ticker
	// Now is the wall clock of the leader's follower timestamps
	// (Describe); nil means time.Now. Core ignores it.
	Now func() time.Time
}

// withDefaults validates c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	if c.NodeID == 0 {
		return c, errors.New("quorum: node id 0 is not a raft id")
	}
	if _, ok := c.Voters[c.NodeID]; !ok {
		return c, fmt.Errorf("quorum: node %d is not among the voters of controller.quorum.voters", c.NodeID)
	}
	if _, ok := c.Voters[0]; ok {
		return c, errors.New("quorum: voter id 0 is not a raft id")
	}
	if c.Dir == "" {
		return c, errors.New("quorum: no directory")
	}
	if c.ClusterID == "" {
		return c, errors.New("quorum: no cluster id")
	}
	if len(c.ClusterID) > maxClusterIDLen {
		return c, fmt.Errorf("quorum: cluster id of %d bytes exceeds %d", len(c.ClusterID), maxClusterIDLen)
	}
	if c.Timing == (Timing{}) {
		t, err := TimingFromKafka(DefaultElectionTimeoutMs, DefaultFetchTimeoutMs, DefaultTickInterval)
		if err != nil {
			return c, err
		}
		c.Timing = t
	}
	if c.Timing.ElectionTick <= c.Timing.HeartbeatTick || c.Timing.HeartbeatTick <= 0 || c.Timing.TickInterval <= 0 {
		return c, fmt.Errorf("quorum: timing %+v: need 0 < HeartbeatTick < ElectionTick and a positive tick", c.Timing)
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = 10000
	}
	if c.RetainEntries == 0 {
		c.RetainEntries = c.SnapshotEntries / 10
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	if c.MaxInflightMsgs == 0 {
		c.MaxInflightMsgs = 256
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Ticker == nil {
		c.Ticker = RealTicker
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

func (c Config) voterIDs() []uint64 {
	ids := make([]uint64, 0, len(c.Voters))
	for id := range c.Voters {
		ids = append(ids, id)
	}
	return ids
}
