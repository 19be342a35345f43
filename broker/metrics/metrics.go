package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metrics holds the broker's collectors. A nil *Metrics records nothing, so
// tests of single handlers need not build one.
type Metrics struct {
	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	bytesIn  prometheus.Counter
	bytesOut prometheus.Counter
	fetched  *prometheus.CounterVec
	conns    prometheus.Gauge
	net      *network
}

// New creates the collectors and registers them with reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cascade_requests_total",
			Help: "Requests handled, by API name and version.",
		}, []string{"api", "version"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cascade_errors_total",
			Help: "Kafka error codes returned (per partition or per request), by API name and code.",
		}, []string{"api", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "cascade_request_duration_seconds",
			Help:    "Time from a request's arrival to its response being ready, by API name; Fetch includes its long-poll wait.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"api"}),
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cascade_network_bytes_in_total",
			Help: "Request bytes read from clients, frames included.",
		}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cascade_network_bytes_out_total",
			Help: "Response bytes written to clients, frames included.",
		}),
		fetched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cascade_fetch_record_bytes_total",
			Help: "Record bytes this broker served in Fetch responses, by topic and by fetcher (consumer or follower), " +
				"as Kafka's BytesOutPerSec and ReplicationBytesOutPerSec.",
		}, []string{"topic", "fetcher"}),
		conns: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cascade_connections",
			Help: "Open client connections.",
		}),
		net: newNetwork(),
	}
	reg.MustRegister(m.requests, m.errors, m.latency, m.bytesIn, m.bytesOut, m.fetched, m.conns)
	reg.MustRegister(m.net.collectors()...)
	return m
}

// apiName returns kmsg's name for an API key ("Produce", "Fetch", ...).
func apiName(key int16) string {
	if n := kmsg.NameForKey(key); n != "" {
		return n
	}
	return strconv.Itoa(int(key))
}

// Request records one handled request and how long it took.
func (m *Metrics) Request(key, version int16, d time.Duration) {
	if m == nil {
		return
	}
	name := apiName(key)
	m.requests.WithLabelValues(name, strconv.Itoa(int(version))).Inc()
	m.latency.WithLabelValues(name).Observe(d.Seconds())
}

// Error records a non-zero Kafka error code returned by an API.
func (m *Metrics) Error(key, code int16) {
	if m == nil || code == 0 {
		return
	}
	m.errors.WithLabelValues(apiName(key), strconv.Itoa(int(code))).Inc()
}

// BytesIn counts request bytes; it implements wire.Observer.
func (m *Metrics) BytesIn(n int) {
	if m != nil {
		m.bytesIn.Add(float64(n))
	}
}

// BytesOut counts response bytes; it implements wire.Observer.
func (m *Metrics) BytesOut(n int) {
	if m != nil {
		m.bytesOut.Add(float64(n))
	}
}

// FetchRecordBytes counts n record bytes of topic served to a consumer, or
// to a follower replica when follower is set.
func (m *Metrics) FetchRecordBytes(topic string, follower bool, n int) {
	if m == nil || n <= 0 {
		return
	}
	fetcher := "consumer"
	if follower {
		fetcher = "follower"
	}
	m.fetched.WithLabelValues(topic, fetcher).Add(float64(n))
}

// Connection tracks open connections; it implements wire.Observer.
func (m *Metrics) Connection(open bool) {
	if m == nil {
		return
	}
	if open {
		m.conns.Inc()
	} else {
		m.conns.Dec()
	}
}
