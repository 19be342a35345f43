package broker_test

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
)

// The conformance tests send the same raw requests to Cascade and to Apache
// Kafka (the oracle, started once per test binary through
// matrix/apachekafka) and compare the answers field by field after
// normalising what must differ. They are skipped under -short, and when the
// oracle cannot be provisioned (no Java or Maven) unless
// CASCADE_REQUIRE_ORACLE is set.

var oracle struct {
	once sync.Once
	b    *apachekafka.Broker
	err  error
}

// oracleAddr returns the address of the shared Apache Kafka broker, started
// with auto topic creation off so both brokers answer unknown topics alike.
func oracleAddr(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("conformance tests start Apache Kafka")
	}
	oracle.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		dist, err := apachekafka.Ensure(ctx)
		if err != nil {
			oracle.err = err
			return
		}
		oracle.b, oracle.err = dist.StartBroker(ctx, apachekafka.BrokerOptions{
			Overrides: map[string]string{"auto.create.topics.enable": "false"},
		})
	})
	if oracle.err != nil {
		if os.Getenv("CASCADE_REQUIRE_ORACLE") != "" {
			t.Fatalf("apache kafka: %v", oracle.err)
		}
		t.Skipf("apache kafka unavailable: %v", oracle.err)
	}
	return oracle.b.Addr()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if oracle.b != nil {
		oracle.b.Stop()
	}
	os.Exit(code)
}

// pair is one raw connection to each broker.
type pair struct {
	kafka, cascade *rawConn
	b              *brokertest.Broker
}

func dialAddr(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

func newPair(t *testing.T) *pair {
	addr := oracleAddr(t)
	b := brokertest.Start(t, map[string]string{"auto.create.topics.enable": "false"})
	return &pair{kafka: dialAddr(t, addr), cascade: dial(t, b), b: b}
}
