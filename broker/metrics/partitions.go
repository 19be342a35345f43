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
