package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// metric is one row of the summary: how to read it from a target's
// medians and, for the rows that have one, from Cascade's ratio to another
// target. The text table and the HTML report share the list.
type metric struct {
	name   string
	format string  // fmt verb for the value
	scale  float64 // the value is divided by scale before printing
	// lowerBetter marks latency, CPU and memory, where a smaller value (and
	// ratio) is better.
	lowerBetter bool
	value       func(Median) (float64, bool)
	ratio       func(Ratio) (float64, bool)
	// chart marks the rows the HTML report draws as bars.
	chart bool
}

func (m metric) text(md Median) string {
	v, ok := m.value(md)
	if !ok {
		return "-"
	}
	return fmt.Sprintf(m.format, v/m.scale)
}

func (m metric) ratioText(r Ratio) string {
	if m.ratio == nil {
		return ""
	}
	v, ok := m.ratio(r)
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v)
}

func some(v float64) (float64, bool) { return v, true }

func maybe(v *float64) (float64, bool) {
	if v == nil {
		return 0, false
	}
	return *v, true
}

// summaryMetrics lists the summary's rows in order.
func summaryMetrics() []metric {
	return []metric{
		{name: "produce records/s", format: "%.0f", scale: 1, chart: true,
			value: func(m Median) (float64, bool) { return some(m.ProduceRecordsPerS) },
			ratio: func(r Ratio) (float64, bool) { return some(r.ProduceRecordsPerS) }},
		{name: "produce MiB/s", format: "%.1f", scale: 1,
			value: func(m Median) (float64, bool) { return some(m.ProduceMiBPerS) }},
		{name: "consume records/s", format: "%.0f", scale: 1, chart: true,
			value: func(m Median) (float64, bool) { return some(m.ConsumeRecordsPerS) },
			ratio: func(r Ratio) (float64, bool) { return some(r.ConsumeRecordsPerS) }},
		{name: "consume MiB/s", format: "%.1f", scale: 1,
			value: func(m Median) (float64, bool) { return some(m.ConsumeMiBPerS) }},
		{name: "ack p50 ms", format: "%.2f", scale: 1, lowerBetter: true,
			value: func(m Median) (float64, bool) { return some(m.AckP50Ms) }},
		{name: "ack p99 ms", format: "%.2f", scale: 1, lowerBetter: true, chart: true,
			value: func(m Median) (float64, bool) { return some(m.AckP99Ms) },
			ratio: func(r Ratio) (float64, bool) { return some(r.AckP99Ms) }},
		{name: "ack p99.9 ms", format: "%.2f", scale: 1, lowerBetter: true,
			value: func(m Median) (float64, bool) { return some(m.AckP999Ms) }},
		{name: "ack max ms", format: "%.2f", scale: 1, lowerBetter: true,
			value: func(m Median) (float64, bool) { return some(m.AckMaxMs) }},
		{name: "broker CPU s", format: "%.1f", scale: 1, lowerBetter: true, chart: true,
			value: func(m Median) (float64, bool) { return maybe(m.BrokerCPUSeconds) },
			ratio: func(r Ratio) (float64, bool) { return maybe(r.BrokerCPUSeconds) }},
		{name: "  in produce", format: "%.2f", scale: 1, lowerBetter: true,
			value: func(m Median) (float64, bool) { return maybe(m.BrokerCPUProduceS) }},
		{name: "  in consume", format: "%.2f", scale: 1, lowerBetter: true,
			value: func(m Median) (float64, bool) { return maybe(m.BrokerCPUConsumeS) }},
		{name: "broker CPU s/GiB produce", format: "%.2f", scale: 1, lowerBetter: true,
			value: func(m Median) (float64, bool) { return maybe(m.BrokerCPUProducePerGiB) }},
		{name: "broker CPU s/GiB consume", format: "%.2f", scale: 1, lowerBetter: true,
			value: func(m Median) (float64, bool) { return maybe(m.BrokerCPUConsumePerGiB) }},
		{name: "client CPU s produce", format: "%.2f", scale: 1, lowerBetter: true,
			value: func(m Median) (float64, bool) { return some(m.ClientCPUProduceS) }},
		{name: "client CPU s consume", format: "%.2f", scale: 1, lowerBetter: true,
			value: func(m Median) (float64, bool) { return some(m.ClientCPUConsumeS) }},
		{name: "client CPU s/M records produce", format: "%.3f", scale: 1, lowerBetter: true,
			value: func(m Median) (float64, bool) { return some(m.ClientCPUProducePerMRecords) }},
		{name: "client CPU s/M records consume", format: "%.3f", scale: 1, lowerBetter: true,
			value: func(m Median) (float64, bool) { return some(m.ClientCPUConsumePerMRecords) }},
		{name: "broker peak RSS MiB", format: "%.0f", scale: 1 << 20, lowerBetter: true, chart: true,
			value: func(m Median) (float64, bool) { return maybe(m.BrokerRSSPeakBytes) },
			ratio: func(r Ratio) (float64, bool) { return maybe(r.BrokerRSSPeakBytes) }},
		{name: "disk MiB", format: "%.1f", scale: 1 << 20, lowerBetter: true,
			value: func(m Median) (float64, bool) { return maybe(m.DiskBytes) }},
	}
}

// WriteTable prints the report's medians, Cascade's ratios and the limits
// as the one-screen summary.
func WriteTable(out io.Writer, rep *Report) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(out, "workload: %s\n", rep.Workload)
	if m := rep.Machine; m.LoadAvgStart != "" {
		fmt.Fprintf(out, "machine: %d CPUs; load average %s at start, %s at end\n", m.CPUs, m.LoadAvgStart, m.LoadAvgEnd)
	}
	head := []string{"metric (median)"}
	for _, m := range rep.Medians {
		head = append(head, fmt.Sprintf("%s (%d)", m.Target, m.Runs))
	}
	for _, r := range rep.Ratios {
		head = append(head, r.Of+"/"+r.To)
	}
	row := func(cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t") }
	row(head...)
	for _, mt := range summaryMetrics() {
		cells := []string{mt.name}
		for _, m := range rep.Medians {
			cells = append(cells, mt.text(m))
		}
		for _, r := range rep.Ratios {
			cells = append(cells, mt.ratioText(r))
		}
		row(cells...)
	}
	verified := []string{"all verified"}
	for _, m := range rep.Medians {
		verified = append(verified, fmt.Sprint(m.AllVerified))
	}
	row(verified...)
	if err := tw.Flush(); err != nil {
		return err
	}
	if s := limitsText(rep); s != "" {
		fmt.Fprintln(out, s)
	}
	if s := ofLimitsText(rep); s != "" {
		fmt.Fprintln(out, s)
	}
	for _, r := range rep.Runs {
		if r.Error != "" {
			fmt.Fprintf(out, "FAILED: %s round %d: %s\n", r.Target, r.Round, r.Error)
		}
	}
	return nil
}

func limitsText(rep *Report) string {
	l := rep.Limits
	if l == nil {
		return ""
	}
	return fmt.Sprintf("limits (median of %d, in %s): disk write %.0f MiB/s with fsync every %d MiB, %.0f MiB/s with fsync at the end, %.0f MiB/s without; loopback TCP %.0f MiB/s",
		l.Samples, l.Dir, l.DiskWriteSyncEveryBytesPerS/(1<<20), l.SyncEveryBytes>>20, l.DiskWriteBytesPerS/(1<<20),
		l.DiskWriteNoSyncBytesPerS/(1<<20), l.LoopbackBytesPerS/(1<<20))
}

func ofLimitsText(rep *Report) string {
	ol := rep.OfLimits
	if ol == nil {
		return ""
	}
	return fmt.Sprintf("cascade produce = %.0f%% of disk write with fsync every %d MiB (%.0f%% with fsync at the end, %.0f%% without), %.0f%% of loopback; consume = %.0f%% of loopback",
		100*ol.ProduceOfDiskWriteSyncEvery, rep.Limits.SyncEveryBytes>>20, 100*ol.ProduceOfDiskWrite, 100*ol.ProduceOfDiskWriteNoSync,
		100*ol.ProduceOfLoopback, 100*ol.ConsumeOfLoopback)
}
