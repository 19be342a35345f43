package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

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
	// The oracle runs without an initial rebalance delay
	// (matrix/apachekafka's server properties); so does Cascade here.
	b := brokertest.Start(t, map[string]string{
		"auto.create.topics.enable":        "false",
		"group.initial.rebalance.delay.ms": "0",
	})
	return &pair{kafka: dialAddr(t, addr), cascade: dial(t, b), b: b}
}

// both sends req to both brokers and returns Kafka's and Cascade's answers.
func (p *pair) both(req kmsg.Request) (kafka, cascade kmsg.Response) {
	p.kafka.t.Helper()
	return p.kafka.do(req), p.cascade.do(req)
}

// ignoredFields differ between any two brokers and are not compared.
var ignoredFields = map[string]bool{
	"ThrottleMillis": true, "ClusterID": true, "Host": true, "Port": true, "UnknownTags": true,
	"LogAppendTime": true, "ProducerID": true, "ControllerID": true,
	"Documentation": true, "ClusterAuthorizedOperations": true,
}

// presenceFields must agree on being set (non-zero) but not on value:
// topic ids and fetch session ids are random.
var presenceFields = map[string]bool{"TopicID": true, "SessionID": true}

// diffResponses compares two decoded responses field by field after
// normalisation and returns one line per difference, "path: kafka=x
// cascade=y". Error messages are compared too: clients show them.
func diffResponses(k, c kmsg.Response) []string {
	var out []string
	diffValue("", reflect.ValueOf(k).Elem(), reflect.ValueOf(c).Elem(), &out)
	return out
}

func diffValue(path string, k, c reflect.Value, out *[]string) {
	if len(*out) > 40 {
		return
	}
	switch k.Kind() {
	case reflect.Struct:
		for i := 0; i < k.NumField(); i++ {
			name := k.Type().Field(i).Name
			if ignoredFields[name] || !k.Type().Field(i).IsExported() {
				continue
			}
			p := path + "." + name
			if presenceFields[name] {
				if k.Field(i).IsZero() != c.Field(i).IsZero() {
					*out = append(*out, fmt.Sprintf("%s: kafka set=%v cascade set=%v", p, !k.Field(i).IsZero(), !c.Field(i).IsZero()))
				}
				continue
			}
			diffValue(p, k.Field(i), c.Field(i), out)
		}
	case reflect.Slice:
		if k.Type().Elem().Kind() == reflect.Uint8 {
			if !bytes.Equal(k.Bytes(), c.Bytes()) {
				*out = append(*out, fmt.Sprintf("%s: kafka %d bytes cascade %d bytes differ", path, k.Len(), c.Len()))
			}
			return
		}
		if k.Len() != c.Len() {
			*out = append(*out, fmt.Sprintf("%s: kafka len=%d cascade len=%d", path, k.Len(), c.Len()))
		}
		for i := 0; i < min(k.Len(), c.Len()); i++ {
			diffValue(fmt.Sprintf("%s[%d]", path, i), k.Index(i), c.Index(i), out)
		}
	case reflect.Pointer:
		if k.IsNil() || c.IsNil() {
			if k.IsNil() != c.IsNil() {
				*out = append(*out, fmt.Sprintf("%s: kafka=%s cascade=%s", path, show(k), show(c)))
			}
			return
		}
		diffValue(path, k.Elem(), c.Elem(), out)
	default:
		if !reflect.DeepEqual(k.Interface(), c.Interface()) {
			*out = append(*out, fmt.Sprintf("%s: kafka=%v cascade=%v", path, k.Interface(), c.Interface()))
		}
	}
}

func show(v reflect.Value) string {
	if v.IsNil() {
		return "null"
	}
	return fmt.Sprint(v.Elem().Interface())
}

// check compares one request's answers, fails the test on a difference not
// listed in known (substrings of the difference lines: differences that
// belong to other packages, documented in the case), and logs the known
// ones that occurred.
// checkSettled is check for a read that follows a write Kafka applies
// through its metadata log (topic configs, for one): Kafka may answer from
// the state before the write for a moment, so its answer is asked again,
// for up to five seconds, until it equals Cascade's; then any difference
// left is reported as check does.
func (p *pair) checkSettled(t *testing.T, name string, req kmsg.Request) (kmsg.Response, kmsg.Response) {
	t.Helper()
	c := p.cascade.do(req)
	deadline := time.Now().Add(5 * time.Second)
	for {
		k := p.kafka.do(req)
		d := diffResponses(k, c)
		if len(d) == 0 {
			return k, c
		}
		if time.Now().After(deadline) {
			for _, line := range d {
				t.Errorf("%s (%s v%d): %s", name, kmsg.NameForKey(req.Key()), req.GetVersion(), line)
			}
			return k, c
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *pair) check(t *testing.T, name string, req kmsg.Request, known ...string) (kmsg.Response, kmsg.Response) {
	t.Helper()
	k, c := p.both(req)
	for _, d := range diffResponses(k, c) {
		expected := false
		for _, s := range known {
			if strings.Contains(d, s) {
				expected = true
				break
			}
		}
		if expected {
			t.Logf("%s: known difference %s", name, d)
		} else {
			t.Errorf("%s (%s v%d): %s", name, kmsg.NameForKey(req.Key()), req.GetVersion(), d)
		}
	}
	return k, c
}
