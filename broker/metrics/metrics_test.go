package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	m.Request(0, 9, time.Millisecond)
	m.Error(0, 10)
	m.BytesIn(1)
	m.BytesOut(1)
	m.Connection(true)
}

// gather returns the families of reg by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func TestCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.Request(0, 9, time.Millisecond)
	m.Request(1, 17, time.Second)
	m.Error(0, 10)
	m.Error(0, 0) // not an error
	m.Connection(true)
	m.BytesIn(100)
	RegisterPartitions(reg, func() []PartitionStat {
		return []PartitionStat{{Topic: "t", Partition: 3, SizeBytes: 42, RecoveryPoint: -1, Segments: 2, Flushes: -1}}
	})
	f := gather(t, reg)
	if n := len(f["cascade_requests_total"].GetMetric()); n != 2 {
		t.Fatalf("request series %d", n)
	}
	errs := f["cascade_errors_total"].GetMetric()
	if len(errs) != 1 || errs[0].GetCounter().GetValue() != 1 {
		t.Fatalf("error series %v (code 0 must not count)", errs)
	}
	if v := f["cascade_network_bytes_in_total"].GetMetric()[0].GetCounter().GetValue(); v != 100 {
		t.Fatalf("bytes in %v", v)
	}
	if v := f["cascade_partition_size_bytes"].GetMetric()[0].GetGauge().GetValue(); v != 42 {
		t.Fatalf("size %v", v)
	}
	if _, ok := f["cascade_partition_recovery_point"]; ok {
		t.Fatal("unknown recovery point exported")
	}
	if _, ok := f["cascade_partition_segments"]; !ok {
		t.Fatal("segments missing")
	}
}

// TestNetworkCounters checks the network layer's collectors, by reason.
func TestNetworkCounters(t *testing.T) {
	var nilM *Metrics
	nilM.FrameRefused("too_large")
	nilM.PanicRecovered(0)
	reg := prometheus.NewRegistry()
	m := New(reg)
	m.FrameRefused("too_large")
	m.FrameRefused("too_large")
	m.FrameRefused("unknown_api")
	m.ConnectionClosed("idle")
	m.AcceptError()
	m.ConnectionRefused("max_connections_per_ip")
	m.AcceptorBlocked("max_connection_creation_rate", 1500*time.Millisecond)
	m.PanicRecovered(18)
	m.PanicRecovered(-1)
	f := gather(t, reg)
	label := func(name, want string) float64 {
		for _, s := range f[name].GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetValue() == want {
					return s.GetCounter().GetValue()
				}
			}
		}
		return -1
	}
	if v := label("cascade_network_frames_refused_total", "too_large"); v != 2 {
		t.Fatalf("too_large %v", v)
	}
	if v := label("cascade_network_connections_closed_total", "idle"); v != 1 {
		t.Fatalf("idle %v", v)
	}
	if v := f["cascade_network_accept_errors_total"].GetMetric()[0].GetCounter().GetValue(); v != 1 {
		t.Fatalf("accept errors %v", v)
	}
	if v := label("cascade_network_connections_refused_total", "max_connections_per_ip"); v != 1 {
		t.Fatalf("refused %v", v)
	}
	if v := label("cascade_network_acceptor_blocked_seconds_total", "max_connection_creation_rate"); v != 1.5 {
		t.Fatalf("blocked seconds %v", v)
	}
	if label("cascade_panics_recovered_total", "ApiVersions") != 1 || label("cascade_panics_recovered_total", "none") != 1 {
		t.Fatal("panics by api")
	}
}
