package broker

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/partition"
)

// logDirs adapts one log.Manager per entry of log.dirs to the partition
// layer's LogManager: a new partition goes to the dir holding the fewest, as
// Kafka's LogManager.nextLogDirs chooses.
type logDirs struct {
	mgrs []*log.Manager
}

func openLogDirs(bc *config.Broker, clusterID string, cfg Config) (*logDirs, error) {
	d := &logDirs{}
	for _, dir := range bc.LogDirs {
		m, err := log.Open(dir, log.Options{
			Clock:     cfg.Now,
			Logger:    cfg.Logger,
			ClusterID: clusterID,
			NodeID:    bc.NodeID,
			// Partitions found on disk start with the broker defaults;
			// the first metadata sync applies their topic overrides.
			ConfigFor: func(log.TopicPartition) log.Config {
				c, err := config.TopicLogConfig(bc, nil)
				if err != nil {
					// The broker config was validated at start, so this
					// is not expected; Kafka's defaults are the safe side.
					cfg.Logger.Error("broker defaults do not make a topic config; using Kafka's", "err", err)
					return log.DefaultConfig()
				}
				return c
			},
			// A cluster node checkpoints its high watermarks, as
			// Kafka's replication-offset-checkpoint: a replica that
			// restarts and leads must not take its whole log as
			// committed.
			HighWatermarkCheckpoint:   !bc.Cluster.Standalone(),
			RetentionCheckInterval:    bc.RetentionCheckInterval,
			CleanerBackoff:            bc.CleanerBackoff,
			CleanerDedupeBufferSize:   bc.CleanerDedupeBufferSize,
			CleanerIOBufferLoadFactor: bc.CleanerIOBufferLoadFactor,
		})
		if err != nil {
			d.close()
			return nil, fmt.Errorf("broker: opening log dir %s: %w", dir, err)
		}
		st := m.Stats()
		cfg.Logger.Info("log dir loaded", "dir", dir, "partitions", st.Partitions, "clean_shutdown", st.CleanShutdown, "took", st.Duration)
		d.mgrs = append(d.mgrs, m)
	}
	return d, nil
}

// Open returns the log of tp, creating it when absent. A log left on disk by
// an earlier topic of the same name (another topic id) is deleted first, as
// KRaft brokers treat such a replica as stray.
func (d *logDirs) Open(tp log.TopicPartition, topicID [16]byte, cfg log.Config) (partition.Log, error) {
	for _, m := range d.mgrs {
		l, ok := m.Get(tp)
		if !ok {
			continue
		}
		if id := l.TopicID(); id == topicID || id == ([16]byte{}) {
			l.SetConfig(cfg)
			return l, nil
		}
		if err := m.Delete(tp); err != nil {
			return nil, err
		}
		return m.Create(tp, topicID, cfg)
	}
	best := d.mgrs[0]
	for _, m := range d.mgrs[1:] {
		if len(m.Logs()) < len(best.Logs()) {
			best = m
		}
	}
	return best.Create(tp, topicID, cfg)
}

// Delete removes tp's log from whichever dir holds it.
func (d *logDirs) Delete(tp log.TopicPartition) error {
	var errs []error
	for _, m := range d.mgrs {
		errs = append(errs, m.Delete(tp))
	}
	return errors.Join(errs...)
}

// warnStrays logs partitions found on disk that the metadata image does not
// name. They are kept, not deleted: on a single node they can only come
// from a copied or restored data dir, and deleting data is not a guess to
// make at start-up.
func (d *logDirs) warnStrays(parts *partition.Manager, lg interface{ Warn(string, ...any) }) {
	for _, m := range d.mgrs {
		for _, l := range m.Logs() {
			if parts.Get(l.TopicPartition()) == nil {
				lg.Warn("partition on disk is not in the metadata; ignoring it", "dir", m.Dir(), "partition", l.TopicPartition().String())
			}
		}
	}
}

// setBrokerEpoch sets the broker epoch every dir's clean shutdown records.
func (d *logDirs) setBrokerEpoch(epoch int64) {
	for _, m := range d.mgrs {
		m.SetBrokerEpoch(epoch)
	}
}

// previousBrokerEpoch is the registration's PreviousBrokerEpoch: the epoch
// every dir's clean shutdown recorded, or -1 when any dir was not shut
// down cleanly or they disagree, as Kafka's BrokerServer reads its
// CleanShutdownFileHandler markers.
func (d *logDirs) previousBrokerEpoch() int64 {
	epoch := int64(-1)
	for i, m := range d.mgrs {
		e := m.Stats().CleanShutdownEpoch
		if e < 0 || (i > 0 && e != epoch) {
			return -1
		}
		epoch = e
	}
	return epoch
}

func (d *logDirs) close() error {
	var errs []error
	for _, m := range d.mgrs {
		errs = append(errs, m.Close())
	}
	return errors.Join(errs...)
}

// segmentFileCollector reports the segment files the process holds open, by
// kind, and the handle cache of sealed segments' .log files, at each scrape.
// With process_open_fds and process_max_fds (the process collector) it
// shows how close storage brings the broker to RLIMIT_NOFILE.
type segmentFileCollector struct {
	open, cached, limit *prometheus.Desc
}

func newSegmentFileCollector() *segmentFileCollector {
	return &segmentFileCollector{
		open: prometheus.NewDesc("cascade_log_open_segment_files",
			"Segment files open in the process, by kind (log, index, timeindex, txnindex).", []string{"kind"}, nil),
		cached: prometheus.NewDesc("cascade_log_segment_file_cache_open",
			"Sealed segments' .log files open in the handle cache.", nil, nil),
		limit: prometheus.NewDesc("cascade_log_segment_file_cache_limit",
			"The bound of the handle cache: a quarter of the soft RLIMIT_NOFILE, within [16, 8192].", nil, nil),
	}
}

func (c *segmentFileCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.open
	ch <- c.cached
	ch <- c.limit
}

func (c *segmentFileCollector) Collect(ch chan<- prometheus.Metric) {
	lg, ix, ti, txn := log.OpenSegmentFiles()
	for _, k := range []struct {
		kind string
		n    int64
	}{{"log", lg}, {"index", ix}, {"timeindex", ti}, {"txnindex", txn}} {
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(k.n), k.kind)
	}
	open, limit := log.CachedSegmentFiles()
	ch <- prometheus.MustNewConstMetric(c.cached, prometheus.GaugeValue, float64(open))
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(limit))
}
