package cascadecontainer_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/docker/cascadecontainer"
)

// image returns the broker image under test, failing when the engine lacks
// it, and skips the test when no Docker engine is reachable.
func image(t *testing.T) string {
	t.Helper()
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		// The reaper's image cannot be pulled without a registry; the
		// tests terminate their containers themselves.
		t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err == nil {
		_, err = cli.Ping(ctx, client.PingOptions{})
	}
	if err != nil {
		t.Skipf("no Docker engine reachable (%v): run ci/docker-setup.sh or start Docker to test the Cascade container helper", err)
	}
	img := os.Getenv("CASCADE_IMAGE")
	if img == "" {
		img = cascadecontainer.DefaultImage
	}
	if _, err := cli.ImageInspect(ctx, img); err != nil {
		t.Fatalf("image %s: %v; build it with ci/docker-setup.sh, or docker build -f docker/cascade.Dockerfile -t %s . (or name another with CASCADE_IMAGE)", img, err, img)
	}
	return img
}

// roundTrip produces one record through the returned bootstrap address
// and reads it back, which needs the advertised listener to be right.
func roundTrip(t *testing.T, ctx context.Context, brokers []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("greetings"),
		kgo.AllowAutoTopicCreation(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "greetings", Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("produce through %v: %v", brokers, err)
	}
	fs := cl.PollRecords(ctx, 1)
	if err := fs.Err0(); err != nil {
		t.Fatalf("consume through %v: %v", brokers, err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "hello" {
		t.Fatalf("consumed %v, want one record \"hello\"", recs)
	}
}

func TestRunPublishedPort(t *testing.T) {
	img := image(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctr, err := cascadecontainer.Run(ctx, img)
	testcontainers.CleanupContainer(t, ctr)
	if err != nil {
		t.Fatal(err)
	}
	brokers, err := ctr.Brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(brokers) != 1 || !strings.HasPrefix(brokers[0], "127.0.0.1:") {
		t.Fatalf("Brokers() = %v, want one loopback address", brokers)
	}
	roundTrip(t, ctx, brokers)
}

func TestRunHostNetworkWithOverride(t *testing.T) {
	img := image(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctr, err := cascadecontainer.Run(ctx, img, cascadecontainer.WithHostNetwork(),
		cascadecontainer.WithOverride("num.partitions", "3"))
	testcontainers.CleanupContainer(t, ctr)
	if err != nil {
		t.Fatal(err)
	}
	brokers, err := ctr.Brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, ctx, brokers)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The auto-created topic took num.partitions from the override.
	td, err := kadm.NewClient(cl).ListTopics(ctx, "greetings")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td["greetings"].Partitions); n != 3 {
		t.Errorf("greetings has %d partitions, want 3 from num.partitions", n)
	}
}

func TestRunRefusedKey(t *testing.T) {
	img := image(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	ctr, err := cascadecontainer.Run(ctx, img, cascadecontainer.WithOverride("no.such.key", "1"))
	testcontainers.CleanupContainer(t, ctr)
	if err == nil {
		t.Fatal("a broker with an unknown key started")
	}
	if !strings.Contains(err.Error(), "no.such.key") {
		t.Errorf("error does not name the refused key: %v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 20*time.Second {
		t.Errorf("the refusal was noticed only after %v: %v", time.Since(start), err)
	}
}
