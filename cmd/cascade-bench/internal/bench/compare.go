package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Report is the tool's JSON output: the workload, every run, the hardware
// limits measured beside them, per-target medians and Cascade's ratios.
type Report struct {
	Workload Workload    `json:"workload"`
	Machine  Machine     `json:"machine"`
	Runs     []RunResult `json:"runs"`
	Limits   *Limits     `json:"limits,omitempty"`
	Medians  []Median    `json:"medians"`
	Ratios   []Ratio     `json:"ratios,omitempty"`
	// OfLimits gives Cascade's median throughput as fractions of the
	// measured limits, when both were measured.
	OfLimits *OfLimits `json:"cascade_of_limits,omitempty"`
}

// Machine describes where the report was made.
type Machine struct {
	CPUs      int    `json:"cpus"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	GoVersion string `json:"go_version"`
	Host      string `json:"host"`
	Start     string `json:"start"`
	// LoadAvgStart and LoadAvgEnd are /proc/loadavg's first three fields
	// when the run began and ended: other work on the machine skews every
	// figure, and these say how much there was.
	LoadAvgStart string `json:"loadavg_start,omitempty"`
	LoadAvgEnd   string `json:"loadavg_end,omitempty"`
}

// loadAvg returns the 1, 5 and 15 minute load averages, or "" where
// /proc/loadavg does not exist.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Median is the median of a target's successful runs, metric by metric.
type Median struct {
	Target             string   `json:"target"`
	Runs               int      `json:"runs"`
	AllVerified        bool     `json:"all_verified"`
	ProduceRecordsPerS float64  `json:"produce_records_per_s"`
	ProduceMiBPerS     float64  `json:"produce_mib_per_s"`
	ConsumeRecordsPerS float64  `json:"consume_records_per_s"`
	ConsumeMiBPerS     float64  `json:"consume_mib_per_s"`
	AckP50Ms           float64  `json:"ack_p50_ms"`
	AckP99Ms           float64  `json:"ack_p99_ms"`
	AckP999Ms          float64  `json:"ack_p99_9_ms"`
	AckMaxMs           float64  `json:"ack_max_ms"`
	BrokerCPUSeconds   *float64 `json:"broker_cpu_s"`
	BrokerCPUProduceS  *float64 `json:"broker_cpu_produce_s"`
	BrokerCPUConsumeS  *float64 `json:"broker_cpu_consume_s"`
	BrokerRSSPeakBytes *float64 `json:"broker_rss_peak_bytes"`
	DiskBytes          *float64 `json:"disk_bytes"`
	ClientCPUProduceS  float64  `json:"client_cpu_produce_s"`
	ClientCPUConsumeS  float64  `json:"client_cpu_consume_s"`
	// Per million records and per GiB, as the runs' fields of those names.
	ClientCPUProducePerMRecords float64  `json:"client_cpu_produce_s_per_m_records"`
	ClientCPUConsumePerMRecords float64  `json:"client_cpu_consume_s_per_m_records"`
	BrokerCPUProducePerGiB      *float64 `json:"broker_cpu_produce_s_per_gib"`
	BrokerCPUConsumePerGiB      *float64 `json:"broker_cpu_consume_s_per_gib"`
}

// Ratio is Cascade's median divided by another target's, per metric. For
// throughput above 1 is better; for latency, CPU and memory below 1 is.
type Ratio struct {
	Of                 string   `json:"of"`
	To                 string   `json:"to"`
	ProduceRecordsPerS float64  `json:"produce_records_per_s"`
	ConsumeRecordsPerS float64  `json:"consume_records_per_s"`
	AckP99Ms           float64  `json:"ack_p99_ms"`
	BrokerCPUSeconds   *float64 `json:"broker_cpu_s"`
	BrokerRSSPeakBytes *float64 `json:"broker_rss_peak_bytes"`
}

// OfLimits is Cascade's median produce and consume payload throughput as
// fractions of the disk and loopback limits.
type OfLimits struct {
	ProduceOfDiskWrite       float64 `json:"produce_of_disk_write"`
	ProduceOfDiskWriteNoSync float64 `json:"produce_of_disk_write_nosync"`
	// ProduceOfDiskWriteSyncEvery is against the probe that fsyncs every
	// Limits.SyncEveryBytes.
	ProduceOfDiskWriteSyncEvery float64 `json:"produce_of_disk_write_sync_every"`
	ProduceOfLoopback           float64 `json:"produce_of_loopback"`
	ConsumeOfLoopback           float64 `json:"consume_of_loopback"`
}

// CompareOptions configure Compare.
type CompareOptions struct {
	Options
	Rounds int
	// LimitsDir, when set, is where the disk probe writes each round (the
	// directory holding the brokers' data dirs); empty skips the limits.
	LimitsDir string
	// DiskProbeBytes is how much the disk probe writes; DiskSyncEveryBytes
	// how often its flushed pass fsyncs (0: DefaultSyncEveryBytes).
	DiskProbeBytes, DiskSyncEveryBytes int64
	// Log receives one line per finished run and per limits measurement.
	Log func(format string, a ...any)
}

// Compare runs w against every target in interleaved rounds: round r starts
// each target fresh, in an order rotated by r so no target always runs
// first, runs the workload, and stops it. Limits are measured at the start
// of each round. It returns the report even when some runs failed; their
// errors are in the runs and in the returned error.
func Compare(ctx context.Context, targets []Target, w Workload, o CompareOptions) (*Report, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if o.Rounds < 1 {
		return nil, fmt.Errorf("%w: rounds %d < 1", errWorkload, o.Rounds)
	}
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	host, _ := os.Hostname()
	rep := &Report{Workload: w, Machine: Machine{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		GoVersion: runtime.Version(), Host: host, Start: time.Now().UTC().Format(time.RFC3339), LoadAvgStart: loadAvg()}}
	var limits []Limits
	var errs []error
	for r := 1; r <= o.Rounds; r++ {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if o.LimitsDir != "" {
			l, err := measureLimits(ctx, o.LimitsDir, o.DiskProbeBytes, o.DiskSyncEveryBytes)
			if err != nil {
				errs = append(errs, fmt.Errorf("round %d limits: %w", r, err))
			} else {
				limits = append(limits, l)
				logf("round %d limits: disk write %.0f MiB/s (fsync every %d MiB), %.0f MiB/s (fsync at end), %.0f MiB/s (no fsync); loopback TCP %.0f MiB/s",
					r, l.DiskWriteSyncEveryBytesPerS/(1<<20), l.SyncEveryBytes>>20, l.DiskWriteBytesPerS/(1<<20),
					l.DiskWriteNoSyncBytesPerS/(1<<20), l.LoopbackBytesPerS/(1<<20))
			}
		}
		for i := range targets {
			t := targets[(i+r-1)%len(targets)]
			res, err := runOne(ctx, t, w, r, o.Options)
			rep.Runs = append(rep.Runs, res)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s round %d: %w", t.Name(), r, err))
				logf("%s round %d FAILED: %v", t.Name(), r, err)
				continue
			}
			logf("%s", runLine(res))
		}
	}
	rep.Machine.LoadAvgEnd = loadAvg()
	if len(limits) > 0 {
		rep.Limits = medianLimits(limits)
	}
	for _, t := range targets {
		if m, ok := median(t.Name(), rep.Runs); ok {
			rep.Medians = append(rep.Medians, m)
		}
	}
	rep.Ratios, rep.OfLimits = ratios(rep.Medians, rep.Limits)
	return rep, errors.Join(errs...)
}

// runOne starts t, runs w and stops t; a failure to stop is the run's
// error too.
func runOne(ctx context.Context, t Target, w Workload, round int, o Options) (RunResult, error) {
	inst, err := t.Start(ctx, round)
	if err != nil {
		res := RunResult{Target: t.Name(), Round: round, Error: err.Error()}
		return res, err
	}
	res, err := Run(ctx, t.Name(), inst, w, round, o)
	if serr := inst.Stop(); serr != nil {
		err = errors.Join(err, fmt.Errorf("stopping: %w", serr))
		res.Error = err.Error()
	}
	return res, err
}

// runLine is the one-line summary printed after each run.
func runLine(r RunResult) string {
	s := fmt.Sprintf("%s round %d: produce %.0f rec/s (%.1f MiB/s), consume %.0f rec/s (%.1f MiB/s), ack p50 %.2f ms p99 %.2f ms max %.2f ms",
		r.Target, r.Round, r.ProduceRecordsPerS, r.ProduceMiBPerS, r.ConsumeRecordsPerS, r.ConsumeMiBPerS,
		r.AckLatencyMs.P50, r.AckLatencyMs.P99, r.AckLatencyMs.Max)
	if r.BrokerCPUSeconds != nil {
		s += fmt.Sprintf(", broker CPU %.1f s, peak RSS %.0f MiB", *r.BrokerCPUSeconds, float64(*r.BrokerRSSPeakBytes)/(1<<20))
	}
	if r.Verified {
		s += ", verified"
	} else {
		v := r.Verification
		s += fmt.Sprintf(", NOT VERIFIED (missing %d, duplicates %d, corrupt %d, unexpected %d)", v.Missing, v.Duplicates, v.Corrupt, v.Unexpected)
	}
	return s
}

func med(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// median takes the median of every metric over target's runs that did not
// fail.
func median(target string, runs []RunResult) (Median, bool) {
	m := Median{Target: target, AllVerified: true}
	var pr, pm, cr, cm, p50, p99, p999, mx, cpu, pcpu, ccpu, rss, disk, clp, clc, clpm, clcm, pg, cg []float64
	for _, r := range runs {
		if r.Target != target || r.Error != "" {
			continue
		}
		m.Runs++
		m.AllVerified = m.AllVerified && r.Verified
		pr, pm = append(pr, r.ProduceRecordsPerS), append(pm, r.ProduceMiBPerS)
		cr, cm = append(cr, r.ConsumeRecordsPerS), append(cm, r.ConsumeMiBPerS)
		p50, p99 = append(p50, r.AckLatencyMs.P50), append(p99, r.AckLatencyMs.P99)
		p999, mx = append(p999, r.AckLatencyMs.P999), append(mx, r.AckLatencyMs.Max)
		clp, clc = append(clp, r.ClientCPUProduceSeconds), append(clc, r.ClientCPUConsumeSeconds)
		clpm, clcm = append(clpm, r.ClientCPUProducePerMRecords), append(clcm, r.ClientCPUConsumePerMRecords)
		add := func(xs []float64, v *float64) []float64 {
			if v == nil {
				return xs
			}
			return append(xs, *v)
		}
		cpu, pcpu, ccpu = add(cpu, r.BrokerCPUSeconds), add(pcpu, r.BrokerCPUProduceSeconds), add(ccpu, r.BrokerCPUConsumeSeconds)
		pg, cg = add(pg, r.BrokerCPUProducePerGiB), add(cg, r.BrokerCPUConsumePerGiB)
		if r.BrokerRSSPeakBytes != nil {
			rss = append(rss, float64(*r.BrokerRSSPeakBytes))
		}
		if r.DiskBytes != nil {
			disk = append(disk, float64(*r.DiskBytes))
		}
	}
	if m.Runs == 0 {
		return m, false
	}
	m.ProduceRecordsPerS, m.ProduceMiBPerS = med(pr), med(pm)
	m.ConsumeRecordsPerS, m.ConsumeMiBPerS = med(cr), med(cm)
	m.AckP50Ms, m.AckP99Ms, m.AckP999Ms, m.AckMaxMs = med(p50), med(p99), med(p999), med(mx)
	opt := func(xs []float64) *float64 {
		if len(xs) == 0 {
			return nil
		}
		v := med(xs)
		return &v
	}
	m.BrokerCPUSeconds, m.BrokerRSSPeakBytes, m.DiskBytes = opt(cpu), opt(rss), opt(disk)
	m.BrokerCPUProduceS, m.BrokerCPUConsumeS = opt(pcpu), opt(ccpu)
	m.ClientCPUProduceS, m.ClientCPUConsumeS = med(clp), med(clc)
	m.ClientCPUProducePerMRecords, m.ClientCPUConsumePerMRecords = med(clpm), med(clcm)
	m.BrokerCPUProducePerGiB, m.BrokerCPUConsumePerGiB = opt(pg), opt(cg)
	return m, true
}

func medianLimits(ls []Limits) *Limits {
	var d, dn, de, lb []float64
	for _, l := range ls {
		d, dn, lb = append(d, l.DiskWriteBytesPerS), append(dn, l.DiskWriteNoSyncBytesPerS), append(lb, l.LoopbackBytesPerS)
		de = append(de, l.DiskWriteSyncEveryBytesPerS)
	}
	return &Limits{Dir: ls[0].Dir, DiskWriteBytesPerS: med(d), DiskWriteNoSyncBytesPerS: med(dn),
		DiskWriteSyncEveryBytesPerS: med(de), SyncEveryBytes: ls[0].SyncEveryBytes, LoopbackBytesPerS: med(lb), Samples: len(ls)}
}

func ratios(ms []Median, l *Limits) ([]Ratio, *OfLimits) {
	var c *Median
	for i := range ms {
		if ms[i].Target == "cascade" {
			c = &ms[i]
		}
	}
	if c == nil {
		return nil, nil
	}
	div := func(a, b float64) float64 {
		if b == 0 {
			return 0
		}
		return a / b
	}
	pdiv := func(a, b *float64) *float64 {
		if a == nil || b == nil || *b == 0 {
			return nil
		}
		v := *a / *b
		return &v
	}
	var rs []Ratio
	for _, o := range ms {
		if o.Target == c.Target {
			continue
		}
		rs = append(rs, Ratio{Of: c.Target, To: o.Target,
			ProduceRecordsPerS: div(c.ProduceRecordsPerS, o.ProduceRecordsPerS),
			ConsumeRecordsPerS: div(c.ConsumeRecordsPerS, o.ConsumeRecordsPerS),
			AckP99Ms:           div(c.AckP99Ms, o.AckP99Ms),
			BrokerCPUSeconds:   pdiv(c.BrokerCPUSeconds, o.BrokerCPUSeconds),
			BrokerRSSPeakBytes: pdiv(c.BrokerRSSPeakBytes, o.BrokerRSSPeakBytes),
		})
	}
	var ol *OfLimits
	if l != nil {
		pb, cb := c.ProduceMiBPerS*(1<<20), c.ConsumeMiBPerS*(1<<20)
		ol = &OfLimits{
			ProduceOfDiskWrite:          div(pb, l.DiskWriteBytesPerS),
			ProduceOfDiskWriteNoSync:    div(pb, l.DiskWriteNoSyncBytesPerS),
			ProduceOfDiskWriteSyncEvery: div(pb, l.DiskWriteSyncEveryBytesPerS),
			ProduceOfLoopback:           div(pb, l.LoopbackBytesPerS),
			ConsumeOfLoopback:           div(cb, l.LoopbackBytesPerS),
		}
	}
	return rs, ol
}
