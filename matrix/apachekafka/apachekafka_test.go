package apachekafka

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ensureOrSkip provisions the distribution, skipping only when java or mvn
// is absent and the test run is -short; otherwise a missing tool fails.
func ensureOrSkip(t *testing.T, ctx context.Context) *Dist {
	t.Helper()
	d, err := Ensure(ctx)
	if errors.Is(err, ErrToolMissing) && testing.Short() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestJavaMajor(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{`openjdk version "17.0.15" 2025-04-15`, 17, true},
		{`java version "1.8.0_392"`, 8, true},
		{`openjdk version "21" 2023-09-19`, 21, true},
		{`nothing here`, 0, false},
	} {
		got, ok := javaMajor(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("javaMajor(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestClusterID(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{21}$`)
	for i := 0; i < 100; i++ {
		id, err := newClusterID()
		if err != nil {
			t.Fatal(err)
		}
		if !re.MatchString(id) {
			t.Fatalf("cluster id %q is not a Kafka Uuid string", id)
		}
	}
}

// TestScriptMatchesArtifacts keeps ci/apache-kafka.sh on the same version
// and artifacts as the Go provisioning.
func TestScriptMatchesArtifacts(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "ci", "apache-kafka.sh"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, `KAFKA_VERSION="${CASCADE_KAFKA_VERSION:-`+DefaultVersion+`}"`) {
		t.Errorf("ci/apache-kafka.sh does not pin Kafka %s", DefaultVersion)
	}
	if !strings.Contains(s, `LOG4J_VERSION="`+log4jVersion+`"`) {
		t.Errorf("ci/apache-kafka.sh does not pin log4j %s", log4jVersion)
	}
	stamp := strings.ReplaceAll(cacheStamp("$KAFKA_VERSION"), log4jVersion, "$LOG4J_VERSION")
	if !strings.Contains(s, `echo "`+stamp+`"`) {
		t.Errorf("ci/apache-kafka.sh does not write the cache stamp %q", stamp)
	}
	for _, a := range Artifacts("$KAFKA_VERSION") {
		p := strings.Split(a, ":")
		if !strings.Contains(s, p[1]) {
			t.Errorf("ci/apache-kafka.sh lacks artifact %s", p[1])
		}
	}
}

func TestBrokerProduceConsumeAndDumpLog(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := ensureOrSkip(t, ctx)

	start := time.Now()
	b, err := d.StartBroker(ctx, BrokerOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Apache Kafka %s started at %s in %v (log %s)", b.Version(), b.Addr(), time.Since(start).Round(time.Millisecond), b.LogPath())
	stopped := false
	defer func() {
		if !stopped {
			b.Stop()
		}
	}()

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumeTopics("t1"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	res, err := adm.CreateTopic(ctx, 1, 1, nil, "t1")
	if err != nil || res.Err != nil {
		t.Fatalf("create topic: %v %v", err, res.Err)
	}
	rec := &kgo.Record{Topic: "t1", Key: []byte("k"), Value: []byte("hello-oracle"),
		Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if rec.Offset != 0 {
		t.Fatalf("first record offset %d, want 0", rec.Offset)
	}
	var got *kgo.Record
	for got == nil {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = r })
	}
	if string(got.Key) != "k" || string(got.Value) != "hello-oracle" || len(got.Headers) != 1 || string(got.Headers[0].Value) != "v" {
		t.Fatalf("consumed %+v", got)
	}
	cl.Close()

	seg := filepath.Join(b.DataDir(), "t1-0", "00000000000000000000.log")
	stopped = true
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	out, err := d.DumpLog(ctx, seg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "payload: hello-oracle") || !strings.Contains(out, "key: k") {
		t.Fatalf("dump log output lacks the record:\n%s", out)
	}
}

func TestMissingToolsAreNamed(t *testing.T) {
	ctx := context.Background()
	t.Setenv("JAVA_HOME", "")
	t.Setenv("PATH", t.TempDir())
	_, err := Ensure(ctx)
	if !errors.Is(err, ErrToolMissing) || !strings.Contains(err.Error(), "install a Java 17+ runtime") {
		t.Errorf("without java: %v", err)
	}

	java, lookErr := exec.LookPath("java")
	if lookErr != nil {
		t.Skip("no java here to build a PATH with java but without mvn")
	}
	bin := t.TempDir()
	if err := os.Symlink(java, filepath.Join(bin, "java")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	t.Setenv("CASCADE_CACHE_DIR", t.TempDir())
	_, err = Ensure(ctx)
	if !errors.Is(err, ErrToolMissing) || !strings.Contains(err.Error(), "install Apache Maven") {
		t.Errorf("without mvn and an empty cache: %v", err)
	}
}

func TestEnsureRejectsBadVersion(t *testing.T) {
	if _, err := EnsureVersion(context.Background(), "4.4.0; rm -rf /"); err == nil {
		t.Error("a version with shell characters was accepted")
	}
}

func TestKillAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Apache Kafka twice")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	d := ensureOrSkip(t, ctx)
	// A restarted broker waits for its old registration to expire; a short
	// broker session keeps the test brief.
	b, err := d.StartBroker(ctx, BrokerOptions{Dir: t.TempDir(), Overrides: map[string]string{
		"broker.session.timeout.ms": "2000", "broker.heartbeat.interval.ms": "500"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	if err := b.Restart(ctx); err == nil {
		t.Fatal("Restart of a running broker succeeded")
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if res, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "t2"); err != nil || res.Err != nil {
		t.Fatalf("create topic: %v %v", err, res.Err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t2", Value: []byte("before-crash")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	if err := b.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := b.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted after SIGKILL in %v", time.Since(start).Round(time.Millisecond))
	cl2, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.ConsumeTopics("t2"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	fs := cl2.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "before-crash" {
		t.Fatalf("after restart read %v", recs)
	}
}
