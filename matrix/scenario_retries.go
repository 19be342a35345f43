package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/cascade-kafka/cascade/faults/proxy"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// lostAnswerToxicType is the proxy toxic that loses Produce answers.
const lostAnswerToxicType = "matrix_lost_produce_answer"

func init() {
	proxy.Register(lostAnswerToxicType, func() any {
		return &countingToxic{Match: proxy.Match{APIKey: 0}, Trigger: proxy.Trigger{Trigger: "once"}, drop: true}
	})
}

// countingToxic counts the requests it acts on in the counter named by its
// attributes, so that a cell knows how often the fault happened or which
// broker a request went to; the lost-answer toxic also drops the answer
// (proxy.Action.DropResponse) of the Produce request: the broker applied
// the batch, the client never learns so and retries it.
type countingToxic struct {
	proxy.Match
	proxy.Trigger
	Counter string `json:"counter"`
	drop    bool
}

var (
	toxicCountsMu sync.Mutex
	toxicCounts   = map[string]int{}
)

// Act counts r and drops its answer or forwards it.
func (t *countingToxic) Act(r *proxy.Request) proxy.Action {
	toxicCountsMu.Lock()
	if _, ok := toxicCounts[t.Counter]; ok {
		toxicCounts[t.Counter]++
	}
	toxicCountsMu.Unlock()
	return proxy.Action{DropResponse: t.drop}
}

// proxied puts faults/proxy in front of the target (the bootstrap address
// and every advertised broker address, since the proxy rewrites Metadata
// and FindCoordinator to point at itself) with the toxic spec on each
// proxy, and returns the group (the caller closes it), the address a
// client bootstraps from and how many proxies were set up.
func proxied(ctx context.Context, e *Env, name string, spec proxy.ToxicSpec) (*proxy.Group, string, int, error) {
	_, addrs, err := brokerVersions(ctx, e)
	if err != nil {
		return nil, "", 0, err
	}
	g := proxy.NewGroup(proxy.Options{})
	front := ""
	seen := map[string]bool{}
	for i, up := range append(e.Seeds(), addrs...) {
		if seen[up] {
			continue
		}
		seen[up] = true
		p, err := g.Add(fmt.Sprintf("%s-%d", name, i), "127.0.0.1:0", up)
		if err == nil {
			err = p.AddToxic(spec)
		}
		if err != nil {
			g.Close()
			return nil, "", 0, fmt.Errorf("proxy to %s: %w", up, err)
		}
		if front == "" {
			front = p.Addr()
		}
	}
	return g, front, len(seen), nil
}

// lostAnswerScenario is HARNESS 2's order under retries: an idempotent
// producer of the client writes 300 records to one partition (linger 1 ms,
// the client's default requests in flight) through faults/proxy, which
// loses the answer to the first Produce request after the broker applied
// it, cutting the connection. The client retries what was in flight with
// the same producer id and sequence numbers, so the broker must recognise
// the duplicate batch (as Kafka's ProducerStateManager does for the last
// five batches) and the partition holds each record once, in order, at the
// acknowledged offsets.
var lostAnswerScenario = Scenario{
	ID:    "5.idempotent-lost-answer",
	Title: "idempotent producer retries after a lost Produce answer: no duplicate, no reordering",
	Run: func(ctx context.Context, e *Env, d driver.Driver) (string, error) {
		topic := e.Topic("lost-answer-" + d.Client())
		if err := createTopic(ctx, e, d, topic, 1, nil); err != nil {
			return "", err
		}
		toxicCountsMu.Lock()
		counter := topic
		toxicCounts[counter] = 0
		toxicCountsMu.Unlock()
		defer func() {
			toxicCountsMu.Lock()
			delete(toxicCounts, counter)
			toxicCountsMu.Unlock()
		}()
		attrs, err := json.Marshal(map[string]any{"api_key": 0, "trigger": "once", "counter": counter})
		if err != nil {
			return "", err
		}
		g, front, n, err := proxied(ctx, e, "lost-answer", proxy.ToxicSpec{Name: "lost-answer", Type: lostAnswerToxicType, Stream: "upstream", Toxicity: 1, Attributes: attrs})
		if err != nil {
			return "", err
		}
		defer g.Close()
		v, err := e.OpenOn(ctx, d.Client(), front)
		if err != nil {
			return "", err
		}
		defer v.Close()
		const count = 300
		recs := make([]driver.Record, count)
		for i := range recs {
			recs[i] = driver.Record{Partition: 0, Value: []byte(fmt.Sprintf("%s-%d", topic, i))}
		}
		start := time.Now()
		dls, err := produceOK(ctx, v, driver.Produce{Topic: topic, Records: recs, Acks: -1, Idempotent: true, LingerMs: 1})
		if err != nil {
			return "", err
		}
		took := time.Since(start).Round(10 * time.Millisecond)
		toxicCountsMu.Lock()
		lost := toxicCounts[counter]
		toxicCountsMu.Unlock()
		if lost != 1 {
			return "", fmt.Errorf("the proxy lost %d Produce answers, want 1", lost)
		}
		if m := len(g.Proxies()); m > n {
			return "", fmt.Errorf("the client reached %d brokers the proxies were not set up for", m-n)
		}
		for i, dl := range dls {
			if dl.Offset != int64(i) {
				return "", fmt.Errorf("record %d acknowledged at offset %d, want %d", i, dl.Offset, i)
			}
		}
		got, err := consumeN(ctx, d, topic, 0, 0, count)
		if err != nil {
			return "", err
		}
		for i, r := range got {
			if string(r.Value) != string(recs[i].Value) || r.Offset != int64(i) {
				return "", fmt.Errorf("offset %d holds %q, want %q", r.Offset, r.Value, recs[i].Value)
			}
		}
		if err := expectOffset(ctx, d, driver.ListOffsets{Topic: topic, Partition: 0, Kind: "latest"}, count); err != nil {
			return "", fmt.Errorf("a retried batch was appended twice: %w", err)
		}
		return fmt.Sprintf("first Produce answer lost after the broker applied it; %d records once each, in order, in %v", count, took), nil
	},
}
