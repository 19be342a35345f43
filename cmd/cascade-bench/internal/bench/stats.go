package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// latencies records one acknowledgement latency per record, exactly, in
// microseconds. Its capacity is fixed when it is made (one slot per record
// a producer sends), so recording is one atomic add and one store, with
// no lock and no growth on the hot path.
type latencies struct {
	n   atomic.Int64
	buf []uint32
}

func newLatencies(capacity int64) *latencies {
	return &latencies{buf: make([]uint32, capacity)}
}

// record stores d; samples beyond the capacity are dropped (they cannot
// occur: each record is acknowledged once).
func (l *latencies) record(d time.Duration) {
	i := l.n.Add(1) - 1
	if i >= int64(len(l.buf)) {
		return
	}
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	if us > math.MaxUint32 {
		us = math.MaxUint32
	}
	l.buf[i] = uint32(us)
}

// recordN stores d n times: the latency of each of a batch's n records,
// acknowledged together.
func (l *latencies) recordN(d time.Duration, n int) {
	us := max(0, min(d.Microseconds(), math.MaxUint32))
	end := l.n.Add(int64(n))
	for i := max(0, end-int64(n)); i < min(end, int64(len(l.buf))); i++ {
		l.buf[i] = uint32(us)
	}
}

func (l *latencies) samples() []uint32 {
	n := min(l.n.Load(), int64(len(l.buf)))
	return l.buf[:n]
}

// Latency holds acknowledgement latency percentiles in milliseconds,
// computed by nearest rank over every sample (no histogram bucketing).
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
}

// summarize merges the samples of all producers and computes Latency.
func summarize(sets ...*latencies) Latency {
	var all []uint32
	for _, s := range sets {
		all = append(all, s.samples()...)
	}
	if len(all) == 0 {
		return Latency{}
	}
	slices.Sort(all)
	var sum float64
	for _, v := range all {
		sum += float64(v)
	}
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(all)))) - 1
		i = max(0, min(i, len(all)-1))
		return float64(all[i]) / 1000
	}
	return Latency{
		Count: int64(len(all)),
		Mean:  sum / float64(len(all)) / 1000,
		P50:   rank(0.50),
		P95:   rank(0.95),
		P99:   rank(0.99),
		P999:  rank(0.999),
		Max:   float64(all[len(all)-1]) / 1000,
	}
}

// Verification is the exact account of what the consumers read.
type Verification struct {
	// Expected is the number of records produced.
	Expected int64 `json:"expected"`
	// Consumed counts every record read, duplicates included.
	Consumed int64 `json:"consumed"`
	// Missing records were never read; Duplicates were read more than
	// once; Corrupt had a wrong size or checksum; Unexpected carried an id
	// outside the workload.
	Missing    int64 `json:"missing"`
	Duplicates int64 `json:"duplicates"`
	Corrupt    int64 `json:"corrupt"`
	Unexpected int64 `json:"unexpected"`
	// FirstMissing lists up to ten missing record ids.
	FirstMissing []uint64 `json:"first_missing,omitempty"`
}

// OK reports whether every record was consumed exactly once, intact.
func (v Verification) OK() bool {
	return v.Expected > 0 && v.Consumed == v.Expected && v.Missing == 0 && v.Duplicates == 0 &&
		v.Corrupt == 0 && v.Unexpected == 0
}

// verifier marks record ids as seen in a bitmap shared by all consumers.
type verifier struct {
	size       int
	expected   int64
	bits       []atomic.Uint64
	consumed   atomic.Int64
	duplicates atomic.Int64
	corrupt    atomic.Int64
	unexpected atomic.Int64
}

func newVerifier(records int64, payloadBytes int) *verifier {
	return &verifier{size: payloadBytes, expected: records, bits: make([]atomic.Uint64, (records+63)/64)}
}

// see checks and counts one consumed value.
func (v *verifier) see(value []byte) {
	v.consumed.Add(1)
	v.check(value)
}

// counted adds n values checked with check.
func (v *verifier) counted(n int) { v.consumed.Add(int64(n)) }

// check checks one consumed value without counting it; the caller adds
// its count with counted, so consumers sharing the verifier touch the
// shared counter once per fetch rather than once per record.
func (v *verifier) check(value []byte) {
	id, ok := ParsePayload(value, v.size)
	if !ok {
		v.corrupt.Add(1)
		return
	}
	if id >= uint64(v.expected) {
		v.unexpected.Add(1)
		return
	}
	bit := uint64(1) << (id % 64)
	if v.bits[id/64].Or(bit)&bit != 0 {
		v.duplicates.Add(1)
	}
}

// markRange checks and counts the n consecutive record ids from first, as
// the raw consumer reads them from a batch header: one atomic operation
// per 64 ids rather than per record.
func (v *verifier) markRange(first int64, n int) {
	v.consumed.Add(int64(n))
	if first < 0 || first+int64(n) > v.expected {
		v.unexpected.Add(int64(n))
		return
	}
	for id, end := first, first+int64(n); id < end; {
		word, bit := id/64, id%64
		span := min(64-bit, end-id)
		mask := ^uint64(0) >> (64 - span) << bit
		if old := v.bits[word].Or(mask); old&mask != 0 {
			v.duplicates.Add(int64(bits.OnesCount64(old & mask)))
		}
		id += span
	}
}

// corruptN counts n records of a batch that failed its checks.
func (v *verifier) corruptN(n int) {
	v.consumed.Add(int64(n))
	v.corrupt.Add(int64(n))
}

func (v *verifier) result() Verification {
	r := Verification{
		Expected:   v.expected,
		Consumed:   v.consumed.Load(),
		Duplicates: v.duplicates.Load(),
		Corrupt:    v.corrupt.Load(),
		Unexpected: v.unexpected.Load(),
	}
	for id := int64(0); id < v.expected; id++ {
		if v.bits[id/64].Load()&(1<<(id%64)) == 0 {
			r.Missing++
			if len(r.FirstMissing) < 10 {
				r.FirstMissing = append(r.FirstMissing, uint64(id))
			}
		}
	}
	return r
}

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc/<pid>/stat
// on every architecture Go supports.
const clockTicks = 100

// ProcStats is what /proc says about a broker process.
type ProcStats struct {
	// CPU is user plus system time of all the process's threads.
	CPU time.Duration
	// PeakRSS is VmHWM: the largest resident set since the process began.
	PeakRSS int64
}

// readProc reads /proc/<pid>/stat and /proc/<pid>/status.
func readProc(pid int) (ProcStats, error) {
	var ps ProcStats
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ps, fmt.Errorf("reading broker CPU time: %w", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// fields are counted after its closing parenthesis.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return ps, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	// After ")" come state (3), ..., utime (14), stime (15).
	if len(f) < 13 {
		return ps, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return ps, fmt.Errorf("malformed CPU times in /proc/%d/stat", pid)
	}
	ps.CPU = time.Duration(ut+st) * time.Second / clockTicks
	status, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ps, fmt.Errorf("reading broker RSS: %w", err)
	}
	defer status.Close()
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return ps, fmt.Errorf("malformed VmHWM in /proc/%d/status: %q", pid, rest)
			}
			ps.PeakRSS = kb << 10
			return ps, nil
		}
	}
	if err := sc.Err(); err != nil {
		return ps, err
	}
	return ps, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// topicDiskBytes sums the allocated size (st_blocks, so sparse preallocated
// index files count only what they use) of every file in the topic's
// partition directories <dataDir>/<topic>-<n>.
func topicDiskBytes(dataDir, topic string) (int64, error) {
	dirs, err := filepath.Glob(filepath.Join(dataDir, topic+"-*"))
	if err != nil {
		return 0, err
	}
	if len(dirs) == 0 {
		return 0, fmt.Errorf("no partition directories for %s under %s", topic, dataDir)
	}
	var total int64
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				return nil
			}
			fi, err := e.Info()
			if err != nil {
				return err
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			} else {
				total += fi.Size()
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("measuring %s: %w", d, err)
		}
	}
	return total, nil
}
