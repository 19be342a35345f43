package log

import (
	"fmt"
	"path/filepath"
)

// The log dir's replication-offset-checkpoint (Kafka's OffsetCheckpointFile
// that ReplicaManager writes every replica.high.watermark.checkpoint.interval.ms):
// "topic partition highWatermark" lines, kept only when
// Options.HighWatermarkCheckpoint is set.

// readHighWatermarks reads the checkpoint at Open. A missing or empty file
// holds no entries. An unreadable one fails Open with ErrStorage, as Kafka's
// CheckpointFileWithFailureHandler takes the log dir offline: a high
// watermark is not guessed. Removing the file is safe; every partition then
// starts its high watermark at its log start and learns it again from the
// leader.
func (m *Manager) readHighWatermarks() (map[TopicPartition]int64, error) {
	if !m.opts.HighWatermarkCheckpoint {
		return nil, nil
	}
	path := filepath.Join(m.dir, highWatermarkFile)
	hws, err := readOffsetCheckpoint(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (removing the file restarts high watermarks from each log start)", ErrStorage, err)
	}
	return hws, nil
}

// trackHighWatermark makes l keep its high watermark for the checkpoint,
// starting at hw bounded by the log (Partition.createLogIfNotExists: 0 when
// the checkpoint has no entry, so the log start).
func (m *Manager) trackHighWatermark(l *Log, hw int64) {
	if !m.opts.HighWatermarkCheckpoint {
		return
	}
	l.hwTracked = true
	l.hw.Store(l.boundHighWatermark(hw))
}

// WriteHighWatermarks writes replication-offset-checkpoint for every log,
// when the log dir keeps one.
func (m *Manager) WriteHighWatermarks() error {
	m.ckptMu.Lock()
	defer m.ckptMu.Unlock()
	return m.writeHighWatermarksLocked()
}

func (m *Manager) writeHighWatermarksLocked() error {
	if !m.opts.HighWatermarkCheckpoint {
		return nil
	}
	hws := map[TopicPartition]int64{}
	for _, l := range m.Logs() {
		hw, _ := l.HighWatermark()
		hws[l.tp] = hw
	}
	if err := writeOffsetCheckpoint(filepath.Join(m.dir, highWatermarkFile), hws); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	return nil
}
