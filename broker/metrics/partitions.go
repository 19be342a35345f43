package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// PartitionStat is one partition's numbers at scrape time.
type PartitionStat struct {
	Topic          string
	Partition      int32
	SizeBytes      int64
	LogStartOffset int64
	LogEndOffset   int64
	HighWatermark  int64
	// RecoveryPoint is the offset below which the log is fsynced; with
	// LogEndOffset it shows how much is not yet on disk (-1: unknown).
	RecoveryPoint int64
	// Segments is the number of segment files (-1: unknown).
	Segments int64
	// Flushes counts fsyncs of the partition's log, when the log reports
	// them (-1 otherwise).
	Flushes int64
}

// partitionCollector asks for the partition list at each scrape, so gauges
// of deleted partitions disappear with them.
type partitionCollector struct {
	stats                                   func() []PartitionStat
	size, start, end, hw, rp, segs, flushes *prometheus.Desc
}

// RegisterPartitions registers gauges fed by stats at every scrape.
func RegisterPartitions(reg prometheus.Registerer, stats func() []PartitionStat) {
	labels := []string{"topic", "partition"}
	reg.MustRegister(&partitionCollector{
		stats:   stats,
		size:    prometheus.NewDesc("cascade_partition_size_bytes", "Bytes of a partition's log segments.", labels, nil),
		start:   prometheus.NewDesc("cascade_partition_log_start_offset", "A partition's log start offset.", labels, nil),
		end:     prometheus.NewDesc("cascade_partition_log_end_offset", "A partition's log end offset.", labels, nil),
		hw:      prometheus.NewDesc("cascade_partition_high_watermark", "A partition's high watermark.", labels, nil),
		rp:      prometheus.NewDesc("cascade_partition_recovery_point", "The offset below which a partition's log is fsynced.", labels, nil),
		segs:    prometheus.NewDesc("cascade_partition_segments", "Segment files of a partition's log.", labels, nil),
		flushes: prometheus.NewDesc("cascade_partition_flushes_total", "Fsyncs of a partition's log.", labels, nil),
	})
}

func (c *partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.size
	ch <- c.start
	ch <- c.end
	ch <- c.hw
	ch <- c.rp
	ch <- c.segs
	ch <- c.flushes
}

func (c *partitionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.stats() {
		lv := []string{s.Topic, strconv.Itoa(int(s.Partition))}
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(s.SizeBytes), lv...)
		ch <- prometheus.MustNewConstMetric(c.start, prometheus.GaugeValue, float64(s.LogStartOffset), lv...)
		ch <- prometheus.MustNewConstMetric(c.end, prometheus.GaugeValue, float64(s.LogEndOffset), lv...)
		ch <- prometheus.MustNewConstMetric(c.hw, prometheus.GaugeValue, float64(s.HighWatermark), lv...)
		if s.RecoveryPoint >= 0 {
			ch <- prometheus.MustNewConstMetric(c.rp, prometheus.GaugeValue, float64(s.RecoveryPoint), lv...)
		}
		if s.Segments >= 0 {
			ch <- prometheus.MustNewConstMetric(c.segs, prometheus.GaugeValue, float64(s.Segments), lv...)
		}
		if s.Flushes >= 0 {
			ch <- prometheus.MustNewConstMetric(c.flushes, prometheus.CounterValue, float64(s.Flushes), lv...)
		}
	}
}

// FetchSessionStat is the fetch session cache's numbers at scrape time.
type FetchSessionStat struct {
	Sessions, Partitions, Bytes int64
	// Evictions counts sessions evicted, by reason.
	Evictions map[string]uint64
	// Refusals counts full fetches served without a new session, by
	// reason.
	Refusals map[string]uint64
}

type fetchSessionCollector struct {
	stat                                          func() FetchSessionStat
	sessions, partitions, bytes, evicted, refused *prometheus.Desc
}

// RegisterFetchSessions registers the fetch session gauges and counters,
// fed by stat at every scrape (Kafka's NumIncrementalFetchSessions,
// NumIncrementalFetchPartitionsCached and
// IncrementalFetchSessionEvictionsPerSec, with Cascade's byte total).
func RegisterFetchSessions(reg prometheus.Registerer, stat func() FetchSessionStat) {
	reg.MustRegister(&fetchSessionCollector{
		stat:       stat,
		sessions:   prometheus.NewDesc("cascade_fetch_sessions", "Incremental fetch sessions cached (KIP-227).", nil, nil),
		partitions: prometheus.NewDesc("cascade_fetch_session_partitions", "Partitions cached in all fetch sessions.", nil, nil),
		bytes:      prometheus.NewDesc("cascade_fetch_session_bytes", "Memory the fetch sessions are accounted to hold.", nil, nil),
		evicted: prometheus.NewDesc("cascade_fetch_session_evictions_total",
			"Fetch sessions evicted, by reason: stale, displaced, too_large, metadata.", []string{"reason"}, nil),
		refused: prometheus.NewDesc("cascade_fetch_session_refusals_total",
			"Full fetches that asked for a session and were served without one, by reason: full, too_large.", []string{"reason"}, nil),
	})
}

func (c *fetchSessionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.sessions
	ch <- c.partitions
	ch <- c.bytes
	ch <- c.evicted
	ch <- c.refused
}

func (c *fetchSessionCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stat()
	ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(st.Sessions))
	ch <- prometheus.MustNewConstMetric(c.partitions, prometheus.GaugeValue, float64(st.Partitions))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.GaugeValue, float64(st.Bytes))
	for reason, n := range st.Evictions {
		ch <- prometheus.MustNewConstMetric(c.evicted, prometheus.CounterValue, float64(n), reason)
	}
	for reason, n := range st.Refusals {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(n), reason)
	}
}
