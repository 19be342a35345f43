package brokertest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker"
	"github.com/cascade-kafka/cascade/broker/config"
)

// Broker is a broker started for a test.
type Broker struct {
	*broker.Broker
	// Dir is the data dir (log.dirs), kept across Restart.
	Dir string
	// Props are the properties the broker was started with.
	Props map[string]string
}

// Start starts a broker with Cascade's defaults except listeners
// (127.0.0.1, ephemeral port) and log.dirs (a t.TempDir), then applies each
// overrides map in order. The broker is closed when the test ends. Set
// CASCADE_TEST_LOG=1 to see the broker's logs.
func Start(t testing.TB, overrides ...map[string]string) *Broker {
	t.Helper()
	props := map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:0",
		"log.dirs":  t.TempDir(),
	}
	for _, o := range overrides {
		for k, v := range o {
			props[k] = v
		}
	}
	b := &Broker{Dir: props["log.dirs"], Props: props}
	b.start(t)
	t.Cleanup(func() {
		if b.Broker != nil {
			if err := b.Broker.Close(); err != nil {
				t.Errorf("brokertest: close: %v", err)
			}
		}
	})
	return b
}

func (b *Broker) start(t testing.TB) {
	t.Helper()
	props := make(map[string]string, len(b.Props))
	for k, v := range b.Props {
		if k != adminKey {
			props[k] = v
		}
	}
	cfg, err := config.New(props)
	if err != nil {
		t.Fatalf("brokertest: config: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("CASCADE_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	br, err := broker.Start(ctx, broker.Config{Broker: cfg, Logger: logger, AdminListener: b.Props[adminKey]})
	if err != nil {
		t.Fatalf("brokertest: start: %v", err)
	}
	b.Broker = br
}

// adminKey lets a test ask for the admin listener through the overrides.
const adminKey = "cascade.admin.listener"

// Restart closes the broker cleanly and starts it again on the same data dir
// and the same port, so clients holding the address reconnect.
func (b *Broker) Restart(t testing.TB) {
	t.Helper()
	addr := b.Addr()
	if err := b.Broker.Close(); err != nil {
		t.Fatalf("brokertest: close: %v", err)
	}
	b.Broker = nil
	_, port, _ := net.SplitHostPort(addr)
	b.Props["listeners"] = "PLAINTEXT://127.0.0.1:" + port
	b.start(t)
}

// Client returns a franz-go client for the broker, closed when the test
// ends. opts are appended to SeedBrokers.
func (b *Broker) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return newClient(t, []string{b.Addr()}, opts)
}

// newClient returns a franz-go client seeded with seeds, closed when the
// test ends.
func newClient(t testing.TB, seeds []string, opts []kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		t.Fatalf("brokertest: client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client over a new franz-go client.
func (b *Broker) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(b.Client(t))
}

// Port returns the listener's port.
func (b *Broker) Port() int {
	_, p, _ := net.SplitHostPort(b.Addr())
	n, _ := strconv.Atoi(p)
	return n
}
