package broker_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/log"
)

// lowestFreeFD returns the descriptor number the next open(2) would get:
// the kernel refuses it with EMFILE when RLIMIT_NOFILE is at most that.
func lowestFreeFD(t *testing.T) uint64 {
	t.Helper()
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	fd := f.Fd()
	f.Close()
	return uint64(fd)
}

// withNoSpareFDs runs fn with the soft RLIMIT_NOFILE at the lowest free
// descriptor number, so any open(2) in the process fails with EMFILE.
func withNoSpareFDs(t *testing.T, fn func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	lim := old
	lim.Cur = lowestFreeFD(t)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	defer func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Fatalf("restoring RLIMIT_NOFILE: %v", err)
		}
	}()
	fn()
}

// TestCreateTopicsStorageError creates a topic while the process has no
// descriptor to spare: the metadata commit (an append to an open journal)
// succeeds, the partition's log cannot be created, and the client is told
// KAFKA_STORAGE_ERROR with the cause; the topic is rolled back, so a retry
// once descriptors are free creates it and it serves records.
func TestCreateTopicsStorageError(t *testing.T) {
	b := brokertest.Start(t)
	adm := b.Admin(t)
	ctx := ctxT(t)
	// Open the connection CreateTopics goes over before the limit drops.
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "warm"); err != nil {
		t.Fatal(err)
	}
	var res error
	var msg string
	withNoSpareFDs(t, func() {
		rs, err := adm.CreateTopics(ctx, 2, 1, nil, "starved")
		if err != nil {
			res = err
			return
		}
		r := rs["starved"]
		res = r.Err
		msg = r.ErrMessage
	})
	if !errors.Is(res, kerr.KafkaStorageError) {
		t.Fatalf("CreateTopics with no descriptor to spare: %v (%q), want KAFKA_STORAGE_ERROR", res, msg)
	}
	if !strings.Contains(msg, "too many open files") || !strings.Contains(msg, "starved-") {
		t.Errorf("error message %q does not name the partition and the cause", msg)
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("starved") {
		t.Fatal("a topic whose partitions could not be created is listed")
	}
	rs, err := adm.CreateTopics(ctx, 2, 1, nil, "starved")
	if err != nil || rs["starved"].Err != nil {
		t.Fatalf("retry with descriptors free: %v, %v", err, rs["starved"].Err)
	}
	cl := b.Client(t, fastMeta, kgo.DefaultProduceTopic("starved"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consume(t, b, "starved", 1)
}

// TestCreatePartitionsStorageError adds a partition whose directory cannot
// be made (a file is in the way): the client is told KAFKA_STORAGE_ERROR
// naming the partition. The partition stays in the metadata, as a partition
// count never shrinks, and the next metadata commit after the cause is gone
// opens it.
func TestCreatePartitionsStorageError(t *testing.T) {
	b := brokertest.Start(t)
	adm := b.Admin(t)
	ctx := ctxT(t)
	if rs, err := adm.CreateTopics(ctx, 1, 1, nil, "grow"); err != nil || rs["grow"].Err != nil {
		t.Fatalf("create: %v, %v", err, rs["grow"].Err)
	}
	block := filepath.Join(b.Dir, "grow-1")
	if err := os.WriteFile(block, []byte("not a partition"), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, err := adm.CreatePartitions(ctx, 1, "grow")
	if err != nil {
		t.Fatal(err)
	}
	r := rs["grow"]
	if !errors.Is(r.Err, kerr.KafkaStorageError) || !strings.Contains(r.ErrMessage, "grow-1") {
		t.Fatalf("CreatePartitions into a blocked directory: %v (%q), want KAFKA_STORAGE_ERROR naming grow-1", r.Err, r.ErrMessage)
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	// Any metadata commit retries opening the partition.
	if rs, err := adm.CreateTopics(ctx, 1, 1, nil, "other"); err != nil || rs["other"].Err != nil {
		t.Fatalf("create: %v, %v", err, rs["other"].Err)
	}
	tp := log.TopicPartition{Topic: "grow", Partition: 1}
	if err := b.Partitions().OpenError(tp); err != nil || b.Partitions().Get(tp) == nil {
		t.Fatalf("grow-1 not opened after the cause was removed: %v", err)
	}
	cl := b.Client(t, fastMeta, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "grow", Partition: 1, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestSegmentFileMetrics checks that the admin listener reports the segment
// files open, by kind, and the handle cache, next to process_open_fds.
func TestSegmentFileMetrics(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"cascade.admin.listener": "127.0.0.1:0"})
	adm := b.Admin(t)
	if rs, err := adm.CreateTopics(ctxT(t), 3, 1, nil, "counted"); err != nil || rs["counted"].Err != nil {
		t.Fatalf("create: %v, %v", err, rs["counted"].Err)
	}
	m := httpGet(t, "http://"+b.AdminAddr()+"/metrics")
	for _, want := range []string{
		`cascade_log_open_segment_files{kind="log"} `,
		`cascade_log_open_segment_files{kind="index"} `,
		`cascade_log_open_segment_files{kind="timeindex"} `,
		`cascade_log_open_segment_files{kind="txnindex"} `,
		`cascade_log_segment_file_cache_open `,
		`cascade_log_segment_file_cache_limit `,
		`process_open_fds `,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// Three partitions' active segments at least (other tests' brokers in
	// this process may hold more).
	for _, line := range strings.Split(m, "\n") {
		if v, ok := strings.CutPrefix(line, `cascade_log_open_segment_files{kind="log"} `); ok {
			if n, err := strconv.ParseFloat(v, 64); err != nil || n < 3 {
				t.Errorf("open .log files %q, want at least 3", v)
			}
		}
	}
}
