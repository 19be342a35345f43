package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

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
	num := func(f string, v float64) string { return fmt.Sprintf(f, v) }
	opt := func(f string, v *float64, scale float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf(f, *v/scale)
	}
	type metric struct {
		name  string
		value func(Median) string
		ratio func(Ratio) string
	}
	ratio := func(v float64) string { return fmt.Sprintf("%.2fx", v) }
	optRatio := func(v *float64) string { return opt("%.2fx", v, 1) }
	metrics := []metric{
		{"produce records/s", func(m Median) string { return num("%.0f", m.ProduceRecordsPerS) }, func(r Ratio) string { return ratio(r.ProduceRecordsPerS) }},
		{"produce MiB/s", func(m Median) string { return num("%.1f", m.ProduceMiBPerS) }, nil},
		{"consume records/s", func(m Median) string { return num("%.0f", m.ConsumeRecordsPerS) }, func(r Ratio) string { return ratio(r.ConsumeRecordsPerS) }},
		{"consume MiB/s", func(m Median) string { return num("%.1f", m.ConsumeMiBPerS) }, nil},
		{"ack p50 ms", func(m Median) string { return num("%.2f", m.AckP50Ms) }, nil},
		{"ack p99 ms", func(m Median) string { return num("%.2f", m.AckP99Ms) }, func(r Ratio) string { return ratio(r.AckP99Ms) }},
		{"ack p99.9 ms", func(m Median) string { return num("%.2f", m.AckP999Ms) }, nil},
		{"ack max ms", func(m Median) string { return num("%.2f", m.AckMaxMs) }, nil},
		{"broker CPU s", func(m Median) string { return opt("%.1f", m.BrokerCPUSeconds, 1) }, func(r Ratio) string { return optRatio(r.BrokerCPUSeconds) }},
		{"  in produce", func(m Median) string { return opt("%.2f", m.BrokerCPUProduceS, 1) }, nil},
		{"  in consume", func(m Median) string { return opt("%.2f", m.BrokerCPUConsumeS, 1) }, nil},
		{"client CPU s produce", func(m Median) string { return num("%.2f", m.ClientCPUProduceS) }, nil},
		{"client CPU s consume", func(m Median) string { return num("%.2f", m.ClientCPUConsumeS) }, nil},
		{"broker peak RSS MiB", func(m Median) string { return opt("%.0f", m.BrokerRSSPeakBytes, 1<<20) }, func(r Ratio) string { return optRatio(r.BrokerRSSPeakBytes) }},
		{"disk MiB", func(m Median) string { return opt("%.1f", m.DiskBytes, 1<<20) }, nil},
		{"all verified", func(m Median) string { return fmt.Sprint(m.AllVerified) }, nil},
	}
	for _, mt := range metrics {
		cells := []string{mt.name}
		for _, m := range rep.Medians {
			cells = append(cells, mt.value(m))
		}
		for _, r := range rep.Ratios {
			if mt.ratio == nil {
				cells = append(cells, "")
			} else {
				cells = append(cells, mt.ratio(r))
			}
		}
		row(cells...)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if l := rep.Limits; l != nil {
		fmt.Fprintf(out, "limits (median of %d, in %s): disk write %.0f MiB/s with fsync, %.0f MiB/s without; loopback TCP %.0f MiB/s\n",
			l.Samples, l.Dir, l.DiskWriteBytesPerS/(1<<20), l.DiskWriteNoSyncBytesPerS/(1<<20), l.LoopbackBytesPerS/(1<<20))
	}
	if ol := rep.OfLimits; ol != nil {
		fmt.Fprintf(out, "cascade produce = %.0f%% of disk write with fsync (%.0f%% without), %.0f%% of loopback; consume = %.0f%% of loopback\n",
			100*ol.ProduceOfDiskWrite, 100*ol.ProduceOfDiskWriteNoSync, 100*ol.ProduceOfLoopback, 100*ol.ConsumeOfLoopback)
	}
	for _, r := range rep.Runs {
		if r.Error != "" {
			fmt.Fprintf(out, "FAILED: %s round %d: %s\n", r.Target, r.Round, r.Error)
		}
	}
	return nil
}
