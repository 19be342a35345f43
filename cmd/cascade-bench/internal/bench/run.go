package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RunResult is one workload run against one target: an element of the
// report's "runs".
type RunResult struct {
	Target string `json:"target"`
	Round  int    `json:"round"`
	Topic  string `json:"topic"`

	ProduceSeconds     float64 `json:"produce_s"`
	ProduceRecordsPerS float64 `json:"produce_records_per_s"`
	ProduceMiBPerS     float64 `json:"produce_mib_per_s"`
	ProduceErrors      int64   `json:"produce_errors"`
	ConsumeSeconds     float64 `json:"consume_s"`
	ConsumeRecordsPerS float64 `json:"consume_records_per_s"`
	ConsumeMiBPerS     float64 `json:"consume_mib_per_s"`
	AckLatencyMs       Latency `json:"ack_latency_ms"`

	// BrokerCPUSeconds is the broker's user+system CPU time during the
	// produce and consume phases; BrokerRSSPeakBytes is its peak resident
	// set since it started. Both are null for a broker the tool did not
	// start.
	BrokerCPUSeconds   *float64 `json:"broker_cpu_s"`
	BrokerRSSPeakBytes *int64   `json:"broker_rss_peak_bytes"`
	// BrokerCPUProduceSeconds and BrokerCPUConsumeSeconds split
	// BrokerCPUSeconds by phase.
	BrokerCPUProduceSeconds *float64 `json:"broker_cpu_produce_s"`
	BrokerCPUConsumeSeconds *float64 `json:"broker_cpu_consume_s"`
	// ClientCPUProduceSeconds and ClientCPUConsumeSeconds are the load
	// tool's own CPU time (all producers or all consumers) in each phase:
	// on a small machine the clients compete with the broker for cores,
	// and these show how much.
	ClientCPUProduceSeconds float64 `json:"client_cpu_produce_s"`
	ClientCPUConsumeSeconds float64 `json:"client_cpu_consume_s"`
	// ClientCPUProducePerMRecords and ClientCPUConsumePerMRecords are the
	// same per million records: what a client costs, comparable across
	// runs of different sizes.
	ClientCPUProducePerMRecords float64 `json:"client_cpu_produce_s_per_m_records"`
	ClientCPUConsumePerMRecords float64 `json:"client_cpu_consume_s_per_m_records"`
	// BrokerCPUProducePerGiB and BrokerCPUConsumePerGiB are the broker's
	// CPU seconds in each phase per GiB of payload produced (consumed);
	// null as BrokerCPUSeconds.
	BrokerCPUProducePerGiB *float64 `json:"broker_cpu_produce_s_per_gib"`
	BrokerCPUConsumePerGiB *float64 `json:"broker_cpu_consume_s_per_gib"`
	// DiskBytes is the space the topic's partition directories take after
	// the produce phase; null when the broker keeps no data dir the tool
	// can see.
	DiskBytes *int64 `json:"disk_bytes"`
	// DiskSource says how DiskBytes was measured: "data dir" (allocated
	// blocks of the partition directories of a broker the tool started) or
	// "DescribeLogDirs" (segment sizes the cluster reports, all replicas);
	// when DiskBytes is null it says why.
	DiskSource string `json:"disk_source"`

	Verified     bool         `json:"verified"`
	Verification Verification `json:"verification"`
	Error        string       `json:"error,omitempty"`
}

// Options are the parts of a run that are not the workload itself.
type Options struct {
	// Progress receives a line every ProgressEvery while a phase runs;
	// nil means no progress.
	Progress      io.Writer
	ProgressEvery time.Duration
	// KeepTopic leaves the benchmark topic in place after the run.
	KeepTopic bool
	// PlantLoss, when at least 0, is a record id the producer counts as
	// sent but never sends. It exists to prove that verification catches a
	// lost record; a run with it set must report verified=false. The raw
	// client leaves out the whole batch holding it.
	PlantLoss int64
	// PlantDuplicate and PlantCorrupt, when above 0, are record ids whose
	// batch the raw client sends twice, or sends with another batch's
	// records under a valid CRC (a full batch only); a run with either
	// set must report verified=false. Other clients refuse them.
	PlantDuplicate, PlantCorrupt int64
}

// Run runs w once against inst and returns the result. A failure of the
// run itself (the topic could not be created, a phase timed out) is both
// returned and recorded in RunResult.Error.
func Run(ctx context.Context, target string, inst *Instance, w Workload, round int, o Options) (RunResult, error) {
	res := RunResult{Target: target, Round: round,
		Topic: "cascade-bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	err := run(ctx, inst, w, o, &res)
	if err != nil {
		res.Error = err.Error()
	}
	return res, err
}

func run(ctx context.Context, inst *Instance, w Workload, o Options, res *RunResult) error {
	if err := w.Validate(); err != nil {
		return err
	}
	if (o.PlantDuplicate > 0 || o.PlantCorrupt > 0) && w.Client != ClientRaw {
		return fmt.Errorf("%w: a planted duplicate or corruption needs --client %s", errWorkload, ClientRaw)
	}
	drv, err := driverFor(w)
	if err != nil {
		return err
	}
	admCl, err := kgo.NewClient(kgo.SeedBrokers(inst.Seeds()...))
	if err != nil {
		return err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	if err := createTopic(ctx, adm, res.Topic, w); err != nil {
		return err
	}
	if !o.KeepTopic {
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			adm.DeleteTopics(dctx, res.Topic) // Best effort: the broker is usually stopped next.
		}()
	}
	label := fmt.Sprintf("%s r%d", res.Target, res.Round)
	if w.WarmupRecords > 0 {
		if err := warmup(ctx, drv, adm, inst, w, o, label, res); err != nil {
			return err
		}
	}
	cpuNow := func() (time.Duration, error) {
		ps, err := inst.procStats()
		return ps.CPU, err
	}
	cpu0, err := cpuNow()
	if err != nil {
		return err
	}
	self0, err := readProc(os.Getpid())
	if err != nil {
		return err
	}
	if err := producePhase(ctx, drv, inst, w, o, label, res); err != nil {
		return err
	}
	cpu1, err := cpuNow()
	if err != nil {
		return err
	}
	self1, err := readProc(os.Getpid())
	if err != nil {
		return err
	}
	res.ClientCPUProduceSeconds = (self1.CPU - self0.CPU).Seconds()
	ends, err := endOffsets(ctx, adm, res.Topic, w.Partitions)
	if err != nil {
		return err
	}
	switch {
	case len(inst.DataDirs) > 0:
		var n int64
		for _, dir := range inst.DataDirs {
			b, err := topicDiskBytes(dir, res.Topic)
			if err != nil {
				return err
			}
			n += b
		}
		res.DiskBytes, res.DiskSource = &n, "data dir"
		if len(inst.DataDirs) > 1 {
			res.DiskSource = fmt.Sprintf("data dirs of %d nodes", len(inst.DataDirs))
		}
	case inst.InMemory:
		res.DiskSource = "in memory"
	default:
		n, err := describedBytes(ctx, adm, res.Topic, w.Partitions)
		if err != nil {
			res.DiskSource = "unknown: " + err.Error()
		} else {
			res.DiskBytes, res.DiskSource = &n, "DescribeLogDirs"
		}
	}
	self1, err = readProc(os.Getpid())
	if err != nil {
		return err
	}
	verr := consumePhase(ctx, drv, inst, w, o, label, ends, res)
	if self2, err := readProc(os.Getpid()); err == nil {
		res.ClientCPUConsumeSeconds = (self2.CPU - self1.CPU).Seconds()
	} else {
		verr = errors.Join(verr, err)
	}
	if len(inst.Pids) > 0 {
		ps, err := inst.procStats()
		if err != nil {
			return errors.Join(verr, err)
		}
		cpu, pcpu, ccpu := (ps.CPU - cpu0).Seconds(), (cpu1 - cpu0).Seconds(), (ps.CPU - cpu1).Seconds()
		res.BrokerCPUSeconds, res.BrokerRSSPeakBytes = &cpu, &ps.PeakRSS
		res.BrokerCPUProduceSeconds, res.BrokerCPUConsumeSeconds = &pcpu, &ccpu
		gib := float64(w.Records) * float64(w.PayloadBytes) / (1 << 30)
		pg, cg := pcpu/gib, ccpu/gib
		res.BrokerCPUProducePerGiB, res.BrokerCPUConsumePerGiB = &pg, &cg
	}
	res.ClientCPUProducePerMRecords = res.ClientCPUProduceSeconds / float64(w.Records) * 1e6
	res.ClientCPUConsumePerMRecords = res.ClientCPUConsumeSeconds / float64(w.Records) * 1e6
	return verr
}

// warmup produces and consumes w.WarmupRecords on a topic of its own and
// deletes it; only a failure is reported.
func warmup(ctx context.Context, drv driver, adm *kadm.Client, inst *Instance, w Workload, o Options, label string, res *RunResult) error {
	ww := w
	ww.Records, ww.Rate, ww.WarmupRecords = w.WarmupRecords, 0, 0
	ww.Producers, ww.Consumers = min(w.Producers, int(ww.Records)), min(w.Consumers, int(ww.Records))
	wr := RunResult{Target: res.Target, Round: res.Round, Topic: res.Topic + "-warmup"}
	o.PlantLoss, o.PlantDuplicate, o.PlantCorrupt = -1, 0, 0
	if err := createTopic(ctx, adm, wr.Topic, w); err != nil {
		return err
	}
	if err := producePhase(ctx, drv, inst, ww, o, label+" warm-up", &wr); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	ends, err := endOffsets(ctx, adm, wr.Topic, w.Partitions)
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := consumePhase(ctx, drv, inst, ww, o, label+" warm-up", ends, &wr); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if !wr.Verified {
		return fmt.Errorf("warm-up records were not consumed exactly once: %+v", wr.Verification)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := adm.DeleteTopics(dctx, wr.Topic)
	if err == nil {
		err = r.Error()
	}
	if err != nil {
		return fmt.Errorf("deleting warm-up topic: %w", err)
	}
	return nil
}

// describedBytes sums the sizes the cluster reports for the topic's
// partitions in DescribeLogDirs, over every broker and log dir.
func describedBytes(ctx context.Context, adm *kadm.Client, topic string, partitions int) (int64, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	set := kadm.TopicsSet{}
	for p := range partitions {
		set.Add(topic, int32(p))
	}
	all, err := adm.DescribeAllLogDirs(dctx, set)
	if err != nil {
		return 0, fmt.Errorf("DescribeLogDirs: %w", err)
	}
	var total int64
	var derr error
	all.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			derr = fmt.Errorf("DescribeLogDirs %s on broker %d: %w", d.Dir, d.Broker, d.Err)
		}
		total += d.Size()
	})
	return total, derr
}

// replicaSettle is how long a run waits after its replicated topic is
// created: twice Kafka's default replica.fetch.wait.max.ms.
const replicaSettle = time.Second

func createTopic(ctx context.Context, adm *kadm.Client, topic string, w Workload) error {
	partitions := w.Partitions
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Replication factor -1 takes the broker's default.replication.factor
	// (KIP-464), so the tool works against any cluster.
	rf := int16(-1)
	if w.ReplicationFactor > 0 {
		rf = int16(w.ReplicationFactor)
	}
	var configs map[string]*string
	if w.MinInsyncReplicas > 0 {
		configs = map[string]*string{"min.insync.replicas": kadm.StringPtr(strconv.Itoa(w.MinInsyncReplicas))}
	}
	r, err := adm.CreateTopic(cctx, int32(partitions), rf, configs, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	// Wait until metadata lists every partition with a leader, so the
	// producers do not start against a half-created topic.
	for {
		md, err := adm.Metadata(cctx, topic)
		if err == nil {
			if t, ok := md.Topics[topic]; ok && t.Err == nil && len(t.Partitions) == partitions {
				ready, replicated := true, false
				for _, p := range t.Partitions {
					ready = ready && p.Err == nil && p.Leader >= 0 && len(p.ISR) == len(p.Replicas)
					replicated = replicated || len(p.Replicas) > 1
				}
				if ready && replicated {
					// A new partition joins a follower's fetcher while its
					// fetch to the leader may be parked for up to
					// replica.fetch.wait.max.ms (500 ms by default, on
					// Kafka and Cascade alike), so its first records wait
					// for that fetch to return: the runs start after it.
					select {
					case <-cctx.Done():
						return fmt.Errorf("topic %s not ready: %w", topic, cctx.Err())
					case <-time.After(replicaSettle):
					}
				}
				if ready {
					return nil
				}
			}
		}
		select {
		case <-cctx.Done():
			return fmt.Errorf("topic %s not ready: %w", topic, cctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func endOffsets(ctx context.Context, adm *kadm.Client, topic string, partitions int) (map[int32]int64, error) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	lo, err := adm.ListEndOffsets(lctx, topic)
	if err == nil {
		err = lo.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing end offsets: %w", err)
	}
	ends := make(map[int32]int64, partitions)
	lo.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	if len(ends) != partitions {
		return nil, fmt.Errorf("listing end offsets: got %d partitions, want %d", len(ends), partitions)
	}
	return ends, nil
}

func producePhase(ctx context.Context, drv driver, inst *Instance, w Workload, o Options, label string, res *RunResult) error {
	ctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	var offered, acked, failed atomic.Int64
	errs := &firstError{}
	jobs := make([]*produceJob, w.Producers)
	lats := make([]*latencies, w.Producers)
	per, extra := w.Records/int64(w.Producers), w.Records%int64(w.Producers)
	first := int64(0)
	for i := range jobs {
		n := per
		if int64(i) < extra {
			n++
		}
		lats[i] = newLatencies(n)
		jobs[i] = &produceJob{addr: inst.Addr, topic: res.Topic, w: w, first: first, count: n,
			rate: w.Rate * float64(n) / float64(w.Records), lat: lats[i],
			offered: &offered, acked: &acked, failed: &failed, errs: errs, skip: -1, dup: -1, corrupt: -1}
		in := func(id int64) bool { return id >= first && id < first+n }
		if in(o.PlantLoss) {
			jobs[i].skip = o.PlantLoss
		}
		if o.PlantDuplicate > 0 && in(o.PlantDuplicate) {
			jobs[i].dup = o.PlantDuplicate
		}
		if o.PlantCorrupt > 0 && in(o.PlantCorrupt) {
			jobs[i].corrupt = o.PlantCorrupt
		}
		first += n
	}
	stop := progress(o, func(elapsed time.Duration, prev int64) (string, int64) {
		a := acked.Load()
		return fmt.Sprintf("[%s] produce %6.1fs  acked %d/%d (%.0f%%)  %s", label, elapsed.Seconds(), a, w.Records,
			100*float64(a)/float64(w.Records), rateText(a-prev, o.ProgressEvery, w.PayloadBytes)), a
	})
	start := time.Now()
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() {
			if err := drv.produce(ctx, j); err != nil {
				errs.set(err)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stop()
	res.ProduceSeconds = elapsed.Seconds()
	res.ProduceErrors = failed.Load()
	n := acked.Load()
	res.ProduceRecordsPerS = float64(n) / elapsed.Seconds()
	res.ProduceMiBPerS = float64(n) * float64(w.PayloadBytes) / (1 << 20) / elapsed.Seconds()
	res.AckLatencyMs = summarize(lats...)
	if err := errs.get(); err != nil {
		return fmt.Errorf("produce: %d of %d records failed: %w", failed.Load(), w.Records, err)
	}
	if n != w.Records {
		return fmt.Errorf("produce: %d of %d records acknowledged", n, w.Records)
	}
	return nil
}

func consumePhase(ctx context.Context, drv driver, inst *Instance, w Workload, o Options, label string, ends map[int32]int64, res *RunResult) error {
	ctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	v := newVerifier(w.Records, w.PayloadBytes)
	var consumed, bytes atomic.Int64
	var total int64
	jobs := make([]*consumeJob, w.Consumers)
	for i := range jobs {
		jobs[i] = &consumeJob{addr: inst.Addr, topic: res.Topic, w: w, ends: map[int32]int64{},
			v: v, consumed: &consumed, bytes: &bytes}
	}
	// Partitions are dealt to consumers round-robin and assigned directly,
	// as kafka-consumer-perf-test's consumers end up with after one
	// rebalance, without the group protocol's timing in the figure.
	for p, end := range ends {
		total += end
		if end > 0 {
			jobs[int(p)%w.Consumers].ends[p] = end
		}
	}
	stop := progress(o, func(elapsed time.Duration, prev int64) (string, int64) {
		c := consumed.Load()
		return fmt.Sprintf("[%s] consume %6.1fs  read %d/%d (%.0f%%)  %s", label, elapsed.Seconds(), c, total,
			100*float64(c)/float64(max(total, 1)), rateText(c-prev, o.ProgressEvery, w.PayloadBytes)), c
	})
	errs := &firstError{}
	start := time.Now()
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() {
			if err := drv.consume(ctx, j); err != nil {
				errs.set(err)
			}
		})
	}
	wg.Wait()
	// The phase ends when the last record was read, as in Kafka's
	// ConsumerPerformance: closing the clients is not consuming.
	end := start
	for _, j := range jobs {
		if j.done.After(end) {
			end = j.done
		}
	}
	if end == start {
		end = time.Now()
	}
	elapsed := end.Sub(start)
	stop()
	res.ConsumeSeconds = elapsed.Seconds()
	res.ConsumeRecordsPerS = float64(consumed.Load()) / elapsed.Seconds()
	res.ConsumeMiBPerS = float64(bytes.Load()) / (1 << 20) / elapsed.Seconds()
	res.Verification = v.result()
	res.Verified = res.Verification.OK()
	if err := errs.get(); err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	return nil
}

// progress prints line() every o.ProgressEvery until the returned function
// is called, which waits for the printer to stop.
func progress(o Options, line func(elapsed time.Duration, prev int64) (string, int64)) func() {
	if o.Progress == nil || o.ProgressEvery <= 0 {
		return func() {}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(o.ProgressEvery)
		defer t.Stop()
		start := time.Now()
		var prev int64
		for {
			select {
			case <-done:
				return
			case <-t.C:
				var s string
				s, prev = line(time.Since(start), prev)
				fmt.Fprintln(o.Progress, s)
			}
		}
	}()
	return func() { close(done); <-stopped }
}

func rateText(n int64, every time.Duration, size int) string {
	s := every.Seconds()
	return fmt.Sprintf("%.0f rec/s  %.1f MiB/s", float64(n)/s, float64(n)*float64(size)/(1<<20)/s)
}
