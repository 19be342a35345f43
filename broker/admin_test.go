package broker_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(body)
}

func TestAdminListenerMetricsAndPprof(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"cascade.admin.listener": "127.0.0.1:0"})
	if b.AdminAddr() == "" {
		t.Fatal("admin listener not started")
	}
	cl := b.Client(t, fastMeta, kgo.DefaultProduceTopic("metered"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consume(t, b, "metered", 1)
	m := httpGet(t, "http://"+b.AdminAddr()+"/metrics")
	for _, want := range []string{
		`cascade_requests_total{api="Produce",version="`,
		`cascade_requests_total{api="Fetch",version="`,
		`cascade_request_duration_seconds_bucket{api="Produce"`,
		`cascade_errors_total{api="Metadata",code="5"}`, // LEADER_NOT_AVAILABLE on auto-create
		`cascade_network_bytes_in_total`,
		`cascade_network_bytes_out_total`,
		`cascade_connections`,
		`cascade_partition_size_bytes{partition="0",topic="metered"}`,
		`cascade_partition_log_end_offset{partition="0",topic="metered"} 1`,
		`cascade_partition_recovery_point{partition="0",topic="metered"}`,
		`cascade_partition_segments{partition="0",topic="metered"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if p := httpGet(t, "http://"+b.AdminAddr()+"/debug/pprof/"); !strings.Contains(p, "goroutine") {
		t.Error("pprof index missing")
	}
}
