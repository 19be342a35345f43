package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"time"
)

// Workload is one benchmark: what is produced, how, and by which client.
// Its field names follow Kafka's perf tools and producer configs; the JSON
// form is the "workload" object of the report.
type Workload struct {
	// Records is the total number of records produced (and consumed).
	Records int64 `json:"records"`
	// PayloadBytes is the size of every record value.
	PayloadBytes int `json:"payload_bytes"`
	// Partitions of the benchmark topic, created fresh for every run.
	Partitions int `json:"partitions"`
	// Producers and Consumers are the number of client instances, each
	// with its own connections, as separate perf-test processes would be.
	Producers int `json:"producers"`
	Consumers int `json:"consumers"`
	// Compression is compression.type: none, gzip, snappy, lz4 or zstd.
	Compression string `json:"compression"`
	// Acks is the producer's acks: "all", "1" or "0". acks=all enables the
	// idempotent producer, as Kafka's producer does by default (KIP-679).
	Acks string `json:"acks"`
	// LingerMs is linger.ms.
	LingerMs int `json:"linger_ms"`
	// BatchBytes is batch.size: the most bytes one partition's batch holds.
	BatchBytes int `json:"batch_bytes"`
	// FetchSize is the consumers' max.partition.fetch.bytes, as
	// kafka-consumer-perf-test's --fetch-size (default 1 MiB, the
	// consumer's own default); fetch.max.bytes stays at the client's
	// default (50 MiB).
	FetchSize int `json:"fetch_size"`
	// Rate is the offered rate in records per second over all producers;
	// 0 sends as fast as the client accepts. With a rate, latency is timed
	// from each record's scheduled send time, so queueing behind a slow
	// broker counts (no coordinated omission).
	Rate float64 `json:"rate"`
	// Client is "franz-go", "confluent-kafka-go" or "raw".
	Client string `json:"client"`
	// FlushMs, when positive, makes the brokers the tool starts fsync
	// every partition periodically (log.flush.interval.ms and
	// log.flush.scheduler.interval.ms); 0 keeps Kafka's default of leaving
	// write-back to the operating system.
	FlushMs int `json:"flush_ms"`
	// WarmupRecords, when positive, are produced and consumed (as fast as
	// possible, verified, on a topic of their own) before the measured
	// run, so a JIT-compiled broker is measured warm as it runs in
	// production. CPU seconds exclude the warm-up; peak RSS includes it.
	WarmupRecords int64 `json:"warmup_records"`
	// Nodes is how many nodes each target the tool starts runs: 1 is a
	// single broker, more a cluster of combined broker-and-controller
	// nodes on loopback (matrix/cascadecluster, matrix/apachekafka), which
	// the clients bootstrap from all.
	Nodes int `json:"nodes"`
	// ReplicationFactor of the benchmark topic; 0 takes the cluster's
	// default.replication.factor.
	ReplicationFactor int `json:"replication_factor"`
	// MinInsyncReplicas, when positive, is the topic's
	// min.insync.replicas; 0 takes the cluster's default.
	MinInsyncReplicas int `json:"min_insync_replicas"`
	// Seed selects the payload bytes; the same seed gives the same bytes.
	Seed uint64 `json:"seed"`
	// Timeout bounds each phase (produce, consume) of one run.
	Timeout time.Duration `json:"-"`
	// TimeoutS is Timeout in seconds, for the report.
	TimeoutS float64 `json:"timeout_s"`
}

// DefaultWorkload returns the defaults of the command's flags.
func DefaultWorkload() Workload {
	return Workload{
		Records:      100_000,
		PayloadBytes: 1024,
		Partitions:   8,
		Producers:    1,
		Consumers:    1,
		Compression:  "none",
		Acks:         "all",
		LingerMs:     5,
		BatchBytes:   16 << 10,
		FetchSize:    1 << 20,
		Client:       ClientFranzGo,
		Nodes:        1,
		Seed:         1,
		Timeout:      10 * time.Minute,
	}
}

// Client names accepted by Workload.Client.
const (
	ClientFranzGo   = "franz-go"
	ClientConfluent = "confluent-kafka-go"
	// ClientRaw is the tool's own raw client: prebuilt batches replayed in
	// hand-framed Produce requests, fetched batches checked by header and
	// checksum without decoding their records (raw*.go).
	ClientRaw = "raw"
)

// MinPayloadBytes is the smallest value that holds a record's id and
// checksum (see Payload).
const MinPayloadBytes = headerBytes + 4

// MaxRecords bounds Records so that the verification bitmap and latency
// samples stay a few hundred MiB at most.
const MaxRecords = 200_000_000

var errWorkload = errors.New("invalid workload")

// Validate reports the first setting that is out of range.
func (w *Workload) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", errWorkload, fmt.Sprintf(format, a...))
	}
	switch {
	case w.Records < 1 || w.Records > MaxRecords:
		return bad("--records %d is outside 1..%d", w.Records, MaxRecords)
	case w.PayloadBytes < MinPayloadBytes || w.PayloadBytes > 16<<20:
		return bad("--payload-bytes %d is outside %d..%d", w.PayloadBytes, MinPayloadBytes, 16<<20)
	case w.Partitions < 1 || w.Partitions > 10000:
		return bad("--partitions %d is outside 1..10000", w.Partitions)
	case w.Producers < 1 || w.Producers > 256:
		return bad("--producers %d is outside 1..256", w.Producers)
	case w.Consumers < 1 || w.Consumers > 256:
		return bad("--consumers %d is outside 1..256", w.Consumers)
	case int64(w.Producers) > w.Records:
		return bad("--producers %d exceeds --records %d", w.Producers, w.Records)
	case w.WarmupRecords < 0 || w.WarmupRecords > MaxRecords:
		return bad("--warmup-records %d is outside 0..%d", w.WarmupRecords, MaxRecords)
	case w.LingerMs < 0 || w.LingerMs > 60_000:
		return bad("--linger-ms %d is outside 0..60000", w.LingerMs)
	case w.BatchBytes < 1 || w.BatchBytes > 64<<20:
		return bad("--batch-bytes %d is outside 1..%d", w.BatchBytes, 64<<20)
	case w.FetchSize < 1 || w.FetchSize > 64<<20:
		return bad("--fetch-size %d is outside 1..%d", w.FetchSize, 64<<20)
	case w.Rate < 0:
		return bad("--rate %g is negative", w.Rate)
	case w.FlushMs < 0:
		return bad("--flush-ms %d is negative", w.FlushMs)
	case w.Timeout <= 0:
		return bad("--timeout must be positive")
	case w.Nodes < 1 || w.Nodes > 9:
		return bad("--nodes %d is outside 1..9", w.Nodes)
	case w.ReplicationFactor < 0 || w.ReplicationFactor > 9:
		return bad("--replication-factor %d is outside 0..9", w.ReplicationFactor)
	case w.MinInsyncReplicas < 0 || w.MinInsyncReplicas > 9:
		return bad("--min-insync-replicas %d is outside 0..9", w.MinInsyncReplicas)
	}
	switch w.Compression {
	case "none", "gzip", "snappy", "lz4", "zstd":
	default:
		return bad("--compression %q is not one of none, gzip, snappy, lz4, zstd", w.Compression)
	}
	switch w.Acks {
	case "all", "-1":
		w.Acks = "all"
	case "1", "0":
	default:
		return bad("--acks %q is not one of all, 1, 0", w.Acks)
	}
	switch w.Client {
	case ClientFranzGo, ClientConfluent, ClientRaw:
	default:
		return bad("--client %q is not one of %s, %s, %s", w.Client, ClientFranzGo, ClientConfluent, ClientRaw)
	}
	w.TimeoutS = w.Timeout.Seconds()
	return nil
}

// String is a one-line summary for progress lines and the table header.
func (w Workload) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d records x %d B, %d partitions, %d producers, %d consumers, compression=%s, acks=%s, linger=%dms, batch=%dB",
		w.Records, w.PayloadBytes, w.Partitions, w.Producers, w.Consumers, w.Compression, w.Acks, w.LingerMs, w.BatchBytes)
	if w.FetchSize != DefaultWorkload().FetchSize {
		fmt.Fprintf(&b, ", fetch-size=%dB", w.FetchSize)
	}
	if w.Rate > 0 {
		fmt.Fprintf(&b, ", rate=%.0f/s", w.Rate)
	}
	if w.FlushMs > 0 {
		fmt.Fprintf(&b, ", flush every %dms", w.FlushMs)
	}
	if w.WarmupRecords > 0 {
		fmt.Fprintf(&b, ", warm-up %d records", w.WarmupRecords)
	}
	for _, o := range []struct {
		format  string
		v, from int
	}{{", %d-node clusters", w.Nodes, 2}, {", RF=%d", w.ReplicationFactor, 1}, {", min.insync.replicas=%d", w.MinInsyncReplicas, 1}} {
		if o.v >= o.from {
			fmt.Fprintf(&b, o.format, o.v)
		}
	}
	fmt.Fprintf(&b, ", client=%s", w.Client)
	return b.String()
}

// A payload is laid out as: 8 bytes record id (big endian), 4 bytes
// CRC-32C of the rest, then pseudo-random bytes derived from the seed and
// the id. Every value is distinct (the id), incompressible (the random
// bytes), and self-checking, so the consumer verifies a record without the
// producer's help.
const headerBytes = 12

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Payload fills dst (of the workload's payload size) with record id's value.
func Payload(dst []byte, seed, id uint64) {
	binary.BigEndian.PutUint64(dst, id)
	body := dst[headerBytes:]
	// splitmix64: fast, stateless per record, and good enough that no
	// Kafka codec finds anything to compress.
	x := seed*0x9E3779B97F4A7C15 ^ id
	i := 0
	for ; i+8 <= len(body); i += 8 {
		x += 0x9E3779B97F4A7C15
		binary.LittleEndian.PutUint64(body[i:], mix64(x))
	}
	if i < len(body) {
		x += 0x9E3779B97F4A7C15
		var tail [8]byte
		binary.LittleEndian.PutUint64(tail[:], mix64(x))
		copy(body[i:], tail[:])
	}
	binary.BigEndian.PutUint32(dst[8:], crc32.Checksum(body, castagnoli))
}

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// ParsePayload returns the record id a value carries and whether the value
// is intact (its size is size and its checksum matches).
func ParsePayload(v []byte, size int) (id uint64, ok bool) {
	if len(v) != size || len(v) < headerBytes {
		return 0, false
	}
	id = binary.BigEndian.Uint64(v)
	return id, binary.BigEndian.Uint32(v[8:]) == crc32.Checksum(v[headerBytes:], castagnoli)
}
