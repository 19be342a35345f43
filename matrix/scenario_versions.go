package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/faults/proxy"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// versionToxicType is the proxy toxic type that records request versions.
const versionToxicType = "matrix_record_versions"

func init() {
	proxy.Register(versionToxicType, func() any {
		return &versionToxic{Match: proxy.Match{APIKey: -1}}
	})
}

// versionToxic is a Kafka-aware proxy toxic that never changes traffic: it
// notes the highest version of every API key a client sent, into the
// recorder named by its attributes.
type versionToxic struct {
	proxy.Match
	proxy.Trigger
	Recorder string `json:"recorder"`
}

// Act records r's version and forwards r untouched.
func (t *versionToxic) Act(r *proxy.Request) proxy.Action {
	recordersMu.Lock()
	rec := recorders[t.Recorder]
	recordersMu.Unlock()
	if rec != nil {
		rec.note(r.Key, r.Version)
	}
	return proxy.Action{}
}

var (
	recordersMu sync.Mutex
	recorders   = map[string]*versionRecorder{}
	recorderSeq int
)

// versionRecorder holds the highest version seen per API key.
type versionRecorder struct {
	mu  sync.Mutex
	max map[int16]int16
}

func (v *versionRecorder) note(key, version int16) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if old, ok := v.max[key]; !ok || version > old {
		v.max[key] = version
	}
}

func (v *versionRecorder) snapshot() map[int16]int16 {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[int16]int16, len(v.max))
	for k, ver := range v.max {
		out[k] = ver
	}
	return out
}

// brokerVersions asks the target for its ApiVersions ranges and its
// advertised broker addresses (from Metadata), once per target run.
func brokerVersions(ctx context.Context, e *Env) (map[int16]int16, []string, error) {
	type result struct {
		max   map[int16]int16
		addrs []string
	}
	v, err := e.Memo("broker-api-versions", func() (any, error) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.Seeds()...))
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("ApiVersions: %w", err)
		}
		if av.ErrorCode != 0 {
			return nil, fmt.Errorf("ApiVersions: %s", driver.CodeName(av.ErrorCode))
		}
		res := result{max: map[int16]int16{}}
		for _, k := range av.ApiKeys {
			res.max[k.ApiKey] = k.MaxVersion
		}
		md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("metadata: %w", err)
		}
		for _, b := range md.Brokers {
			res.addrs = append(res.addrs, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
		}
		return res, nil
	})
	if err != nil {
		return nil, nil, err
	}
	r := v.(result)
	return r.max, r.addrs, nil
}

// versionsScenario is the version negotiation cell (HARNESS 11): a second
// instance of the client talks to the target through a recording proxy
// (faults/proxy, which rewrites Metadata and FindCoordinator so the client
// never bypasses it) while it creates a topic, produces idempotently,
// consumes, lists offsets, consumes in a group with commits, reads the
// committed offsets, describes configs and deletes the group and topic. The
// detail lists the highest version the client sent per API key, with the
// target's advertised maximum where the client stayed below it; a version
// above the advertised maximum fails the cell.
var versionsScenario = Scenario{
	ID:    "9.api-versions",
	Title: "request versions each client negotiates (ApiVersions) over a common workload",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		ctx = WithoutHistory(ctx)
		bmax, _, err := brokerVersions(ctx, e)
		if err != nil {
			return "", err
		}
		recordersMu.Lock()
		recorderSeq++
		id := fmt.Sprintf("%s-%d", e.runID, recorderSeq)
		rec := &versionRecorder{max: map[int16]int16{}}
		recorders[id] = rec
		recordersMu.Unlock()
		defer func() {
			recordersMu.Lock()
			delete(recorders, id)
			recordersMu.Unlock()
		}()
		attrs, err := json.Marshal(map[string]any{"api_key": -1, "recorder": id})
		if err != nil {
			return "", err
		}
		// One recording proxy for the bootstrap address and one per
		// advertised broker address that differs.
		g, front, nproxies, err := proxied(ctx, e, "versions", proxy.ToxicSpec{Name: "versions", Type: versionToxicType, Stream: "upstream", Toxicity: 1, Attributes: attrs})
		if err != nil {
			return "", err
		}
		defer g.Close()
		open, ok := driver.Lookup(d.Client())
		if !ok {
			return "", fmt.Errorf("no driver registered for client %q", d.Client())
		}
		v, err := open(ctx, front)
		if err != nil {
			return "", fmt.Errorf("open %s through the proxy: %w", d.Client(), err)
		}
		defer v.Close()
		if err := versionsWorkload(ctx, e, v); err != nil {
			return "", err
		}
		if n := len(g.Proxies()); n > nproxies {
			return "", fmt.Errorf("the client reached %d brokers the recording proxies were not set up for", n-nproxies)
		}
		used := rec.snapshot()
		keys := make([]int, 0, len(used))
		for k := range used {
			keys = append(keys, int(k))
		}
		sort.Ints(keys)
		var parts, over []string
		for _, k := range keys {
			key, ver := int16(k), used[int16(k)]
			s := fmt.Sprintf("%s v%d", kmsg.NameForKey(key), ver)
			m, ok := bmax[key]
			switch {
			case key == int16(kmsg.ApiVersions) && ok && ver > m:
				// A client may open with a newer ApiVersions than the
				// broker knows; the broker answers UNSUPPORTED_VERSION
				// with its ranges and the client retries lower (KIP-511).
				s += fmt.Sprintf(" (max %d, retried lower)", m)
			case !ok || ver > m:
				over = append(over, fmt.Sprintf("%s v%d (advertised: %v, max %d)", kmsg.NameForKey(key), ver, ok, m))
			case ver < m:
				s += fmt.Sprintf(" (max %d)", m)
			}
			parts = append(parts, s)
		}
		detail := strings.Join(parts, ", ")
		if len(over) > 0 {
			return detail, fmt.Errorf("sent versions the target does not advertise: %s", strings.Join(over, "; "))
		}
		return detail, nil
	},
	Timeout: 60 * time.Second,
}

// versionsWorkload exercises the request types most applications send.
func versionsWorkload(ctx context.Context, e *Env, d driver.Driver) error {
	topic := e.Topic("versions-" + d.Client())
	if err := createTopic(ctx, e, d, topic, 2, nil); err != nil {
		return err
	}
	recs := make([]driver.Record, 6)
	for i := range recs {
		recs[i] = driver.Record{Partition: int32(i % 2), Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("%s-%d", topic, i))}
	}
	if _, err := produceOK(ctx, d, driver.Produce{Topic: topic, Records: recs, Acks: -1, Idempotent: true}); err != nil {
		return err
	}
	if _, err := consumeN(ctx, d, topic, 0, 0, 3); err != nil {
		return err
	}
	if _, err := d.ListOffsets(ctx, driver.ListOffsets{Topic: topic, Partition: 0, Kind: "latest"}); err != nil {
		return fmt.Errorf("list offsets: %w", err)
	}
	group := topic + "-g"
	if _, err := groupRead(ctx, d, driver.GroupConsume{Group: group, Topic: topic, Commit: true}, len(recs)); err != nil {
		return fmt.Errorf("group consume: %w", err)
	}
	if _, err := d.FetchCommitted(ctx, driver.FetchCommitted{Group: group, Topic: topic, Partition: 0}); err != nil {
		return fmt.Errorf("fetch committed: %w", err)
	}
	if _, err := d.DescribeConfigs(ctx, topic); err != nil {
		return fmt.Errorf("describe configs: %w", err)
	}
	if err := d.DeleteGroup(ctx, group); err != nil {
		return fmt.Errorf("delete group: %w", err)
	}
	if err := d.DeleteTopic(ctx, topic); err != nil {
		return fmt.Errorf("delete topic: %w", err)
	}
	return nil
}
