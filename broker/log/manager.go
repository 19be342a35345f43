package log

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// metadataTopic is KRaft's metadata log, which Kafka's LogManager does not
// load as a partition; broker/metadata owns it.
const metadataTopic = "__cluster_metadata"

// ErrExists is returned by Create when the partition exists with another
// topic id.
var ErrExists = errors.New("log: partition exists with a different topic id")

// Manager owns one log dir: it loads every partition at Open (recovering
// after an unclean stop), creates and deletes partitions, runs the
// background flusher, checkpoints recovery points and log start offsets,
// applies retention, and writes the clean-shutdown marker on Close, as
// Kafka's LogManager does for one directory.
type Manager struct {
	dir  string
	opts Options

	mu     sync.RWMutex
	logs   map[TopicPartition]*Log
	closed bool

	lock     *os.File
	flusher  *flusher
	stop     chan struct{}
	wg       sync.WaitGroup
	deletes  sync.WaitGroup
	ckptWake chan struct{}
	ckptMu   sync.Mutex
	wasClean bool
	// cleanEpoch is the broker epoch the last clean shutdown recorded,
	// -1 when it was not clean.
	cleanEpoch int64
	// brokerEpoch is what Close records in the clean-shutdown marker.
	brokerEpoch atomic.Int64
	loadStats   LoadStats
	cleaner     cleanerState
}

// LoadStats describes what Open found.
type LoadStats struct {
	Partitions    int
	CleanShutdown bool
	// CleanShutdownEpoch is the broker epoch the clean shutdown recorded
	// (0 from a single node), -1 when the last shutdown was not clean.
	CleanShutdownEpoch int64
	Duration           time.Duration
}

// Open loads the log dir, creating it if needed. Each partition directory
// is opened and, when the previous stop was not clean (no
// .kafka_cleanshutdown marker), recovered from its recovery point.
func Open(dir string, opts Options) (*Manager, error) {
	opts = opts.withDefaults()
	start := opts.Clock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	m := &Manager{dir: dir, opts: opts, logs: map[TopicPartition]*Log{}, stop: make(chan struct{}), ckptWake: make(chan struct{}, 1), lock: lock}
	m.flusher = newFlusher(m)
	ok := false
	defer func() {
		if !ok {
			lock.Close()
		}
	}()
	if err := m.ensureMetaProperties(); err != nil {
		return nil, err
	}
	marker := filepath.Join(dir, cleanShutdownFile)
	m.cleanEpoch = -1
	epoch, hadMarker := readCleanShutdown(dir)
	if hadMarker {
		m.wasClean, m.cleanEpoch = true, epoch
	}
	rps, err := readOffsetCheckpoint(filepath.Join(dir, recoveryPointFile))
	if err != nil {
		opts.Logger.Warn("ignoring unreadable recovery point checkpoint", "err", err)
		rps, m.wasClean, m.cleanEpoch = map[TopicPartition]int64{}, false, -1
	}
	starts, err := readOffsetCheckpoint(filepath.Join(dir, logStartOffsetFile))
	if err != nil {
		opts.Logger.Warn("ignoring unreadable log start checkpoint", "err", err)
		starts = map[TopicPartition]int64{}
	}
	hws, err := m.readHighWatermarks()
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		if strings.HasSuffix(name, "-delete") {
			m.removeAsync(filepath.Join(dir, name))
			continue
		}
		tp, ok := parsePartitionDir(name)
		if !ok || tp.Topic == metadataTopic {
			continue
		}
		cfg := DefaultConfig()
		if opts.ConfigFor != nil {
			cfg = opts.ConfigFor(tp)
		}
		rp, hasRP := rps[tp]
		if !hasRP {
			rp = -1
		}
		l, err := openLog(loadParams{tp: tp, dir: filepath.Join(dir, name), cfg: cfg,
			recoveryPoint: rp, logStart: starts[tp], clean: m.wasClean && hasRP}, &m.opts, m)
		if err != nil {
			m.closeLogs(false)
			return nil, fmt.Errorf("%w: loading %s: %v", ErrStorage, name, err)
		}
		m.trackHighWatermark(l, hws[tp])
		m.logs[tp] = l
	}
	// A crash from now on must not look clean (LogManager deletes the
	// marker once logs are loaded).
	if hadMarker {
		if err := os.Remove(marker); err != nil {
			m.closeLogs(false)
			return nil, fmt.Errorf("%w: %v", ErrStorage, err)
		}
		if err := syncDir(dir); err != nil {
			m.closeLogs(false)
			return nil, fmt.Errorf("%w: %v", ErrStorage, err)
		}
	}
	if err := m.WriteCheckpoints(); err != nil {
		m.closeLogs(false)
		return nil, err
	}
	m.loadStats = LoadStats{Partitions: len(m.logs), CleanShutdown: m.wasClean, CleanShutdownEpoch: m.cleanEpoch,
		Duration: opts.Clock().Sub(start)}
	m.wg.Add(1)
	m.flusher.done.Add(1)
	go m.flusher.run()
	go m.background()
	m.startCleaner()
	ok = true
	return m, nil
}

// SetBrokerEpoch sets the broker epoch a clean Close records, as Kafka's
// CleanShutdownFileHandler, so that the next registration can prove the
// shutdown was clean (PreviousBrokerEpoch).
func (m *Manager) SetBrokerEpoch(epoch int64) { m.brokerEpoch.Store(epoch) }

// Stats returns what Open found.
func (m *Manager) Stats() LoadStats { return m.loadStats }

// Dir returns the log dir.
func (m *Manager) Dir() string { return m.dir }

func (m *Manager) ensureMetaProperties() error {
	if _, err := readMetaProperties(m.dir); err == nil {
		return nil
	} else if !os.IsNotExist(err) {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	var dirID [16]byte
	if _, err := rand.Read(dirID[:]); err != nil {
		return err
	}
	cluster := m.opts.ClusterID
	if cluster == "" {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return err
		}
		cluster = encodeTopicID(id)
	}
	return writeMetaProperties(m.dir, cluster, m.opts.NodeID, dirID)
}

// MetaProperties returns the key/values of the log dir's meta.properties.
func (m *Manager) MetaProperties() (map[string]string, error) { return readMetaProperties(m.dir) }

// parsePartitionDir splits "<topic>-<partition>" at the last dash.
func parsePartitionDir(name string) (TopicPartition, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return TopicPartition{}, false
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: name[:i], Partition: int32(p)}, true
}

func (m *Manager) partitionDir(tp TopicPartition) string {
	return filepath.Join(m.dir, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
}

// Create returns the partition's log, creating its directory with
// partition.metadata if it does not exist (LogManager.getOrCreateLog).
func (m *Manager) Create(tp TopicPartition, topicID [16]byte, cfg Config) (*Log, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if l, ok := m.logs[tp]; ok {
		if l.topicID != topicID && l.topicID != ([16]byte{}) {
			return nil, fmt.Errorf("%w: %s", ErrExists, tp)
		}
		return l, nil
	}
	if tp.Topic == "" || strings.ContainsAny(tp.Topic, "/\\") || tp.Topic == "." || tp.Topic == ".." || tp.Partition < 0 {
		return nil, fmt.Errorf("%w: bad partition name %q-%d", ErrInvalidRecord, tp.Topic, tp.Partition)
	}
	dir := m.partitionDir(tp)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if err := syncDir(m.dir); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	l, err := openLog(loadParams{tp: tp, dir: dir, topicID: topicID, hasTopicID: true, cfg: cfg,
		recoveryPoint: 0, clean: true}, &m.opts, m)
	if err != nil {
		return nil, fmt.Errorf("%w: creating %s: %v", ErrStorage, tp, err)
	}
	m.trackHighWatermark(l, 0)
	m.logs[tp] = l
	return l, nil
}

// Get returns the partition's log.
func (m *Manager) Get(tp TopicPartition) (*Log, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	l, ok := m.logs[tp]
	return l, ok
}

// Logs returns every log, ordered by topic and partition.
func (m *Manager) Logs() []*Log {
	m.mu.RLock()
	out := make([]*Log, 0, len(m.logs))
	for _, l := range m.logs {
		out = append(out, l)
	}
	m.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].tp, out[j].tp
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return out
}

// Delete closes the partition's log, renames its directory to
// "<topic>-<partition>.<id>-delete" and removes it in the background, as
// LogManager.asyncDelete. Open Regions stay readable until released.
func (m *Manager) Delete(tp TopicPartition) error {
	m.mu.Lock()
	l, ok := m.logs[tp]
	if ok {
		delete(m.logs, tp)
	}
	m.mu.Unlock()
	if !ok {
		return nil
	}
	l.close(false)
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	dst := fmt.Sprintf("%s.%s-delete", l.dir, hex.EncodeToString(id[:]))
	if err := os.Rename(l.dir, dst); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if err := syncDir(m.dir); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	m.removeAsync(dst)
	if err := m.forgetCleaner(tp); err != nil {
		return err
	}
	return m.WriteCheckpoints()
}

func (m *Manager) removeAsync(path string) {
	m.deletes.Add(1)
	go func() {
		defer m.deletes.Done()
		if err := os.RemoveAll(path); err != nil {
			m.opts.Logger.Error("removing deleted partition", "path", path, "err", err)
		}
	}()
}

// WriteCheckpoints writes recovery-point-offset-checkpoint,
// log-start-offset-checkpoint and, when the log dir keeps one,
// replication-offset-checkpoint for every log.
func (m *Manager) WriteCheckpoints() error {
	m.ckptMu.Lock()
	defer m.ckptMu.Unlock()
	rps := map[TopicPartition]int64{}
	starts := map[TopicPartition]int64{}
	for _, l := range m.Logs() {
		rps[l.tp] = l.recoveryPoint.Load()
		starts[l.tp] = l.logStart.Load()
	}
	if err := writeOffsetCheckpoint(filepath.Join(m.dir, recoveryPointFile), rps); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	if err := writeOffsetCheckpoint(filepath.Join(m.dir, logStartOffsetFile), starts); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	return m.writeHighWatermarksLocked()
}

// logStartChanged asks the background loop to checkpoint log start offsets.
func (m *Manager) logStartChanged() {
	select {
	case m.ckptWake <- struct{}{}:
	default:
	}
}

// ApplyRetention runs one retention pass over every log
// (LogManager.cleanupLogs) and returns the number of segments deleted.
func (m *Manager) ApplyRetention() (int, error) {
	total := 0
	var first error
	for _, l := range m.Logs() {
		n, err := l.ApplyRetention()
		total += n
		if err != nil && first == nil {
			first = err
		}
	}
	return total, first
}

// FlushDue runs one background-flusher pass now (for tests and shutdown).
func (m *Manager) FlushDue() { m.flusher.FlushDue() }

func (m *Manager) background() {
	defer m.wg.Done()
	ckpt := time.NewTicker(m.opts.CheckpointInterval)
	defer ckpt.Stop()
	var expiry <-chan time.Time
	if m.opts.ProducerIDExpiration > 0 {
		t := time.NewTicker(m.opts.ProducerIDExpirationCheckInterval)
		defer t.Stop()
		expiry = t.C
	}
	var retention <-chan time.Time
	if m.opts.RetentionCheckInterval > 0 {
		t := time.NewTicker(m.opts.RetentionCheckInterval)
		defer t.Stop()
		retention = t.C
	}
	var hwCkpt <-chan time.Time
	if m.opts.HighWatermarkCheckpoint {
		t := time.NewTicker(m.opts.HighWatermarkCheckpointInterval)
		defer t.Stop()
		hwCkpt = t.C
	}
	for {
		select {
		case <-m.stop:
			return
		case <-hwCkpt:
			if err := m.WriteHighWatermarks(); err != nil {
				m.opts.Logger.Error("high watermark checkpoint", "err", err)
			}
			continue
		case <-ckpt.C:
		case <-m.ckptWake:
		case <-retention:
			if _, err := m.ApplyRetention(); err != nil {
				m.opts.Logger.Error("retention", "err", err)
			}
		case <-expiry:
			for _, l := range m.Logs() {
				l.ExpireProducers()
			}
			continue
		}
		if err := m.WriteCheckpoints(); err != nil {
			m.opts.Logger.Error("checkpoint", "err", err)
		}
	}
}

func (m *Manager) closeLogs(flush bool) error {
	var first error
	for _, l := range m.logs {
		if err := l.close(flush); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Close stops the background work, flushes and closes every log, writes
// the checkpoints and, if all of that succeeded, the clean-shutdown marker
// (LogManager.shutdown).
func (m *Manager) Close() error {
	if !m.stopBackground() {
		return nil
	}
	err := m.closeLogs(true)
	if cerr := m.WriteCheckpoints(); err == nil {
		err = cerr
	}
	m.deletes.Wait()
	defer m.lock.Close()
	if err != nil {
		return err
	}
	for _, l := range m.logs {
		if l.err.Load() != nil {
			return nil // an offline log must be recovered at the next start
		}
	}
	if err := writeCleanShutdown(m.dir, m.brokerEpoch.Load()); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	return nil
}
