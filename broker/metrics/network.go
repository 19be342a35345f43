package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// network holds the collectors of the broker's network layer, which
// broker/wire reports through its Observer interface.
type network struct {
	framesRefused    *prometheus.CounterVec
	connsClosed      *prometheus.CounterVec
	acceptErrors     prometheus.Counter
	connsRefused     *prometheus.CounterVec
	acceptorBlocked  *prometheus.CounterVec
	acceptorBlockedS *prometheus.CounterVec
	panicsRecovered  *prometheus.CounterVec
}

func newNetwork() *network {
	return &network{
		framesRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cascade_network_frames_refused_total",
			Help: "Request frames that closed their connection before being served, by reason " +
				"(too_large, negative, empty, unknown_api, api_frame_cap, decode_too_large, bad_header).",
		}, []string{"reason"}),
		connsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cascade_network_connections_closed_total",
			Help: "Connections the broker closed for slowness or a fault, by reason (idle, write_idle, panic).",
		}, []string{"reason"}),
		acceptErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cascade_network_accept_errors_total",
			Help: "Failed accepts of the client listener (EMFILE and the like), each retried after a back-off.",
		}),
		connsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cascade_network_connections_refused_total",
			Help: "Connections closed at once by a connection quota, by reason (max_connections_per_ip).",
		}, []string{"reason"}),
		acceptorBlocked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cascade_network_acceptor_blocked_total",
			Help: "Times the acceptor waited before taking a connection, by reason " +
				"(max_connections, max_connection_creation_rate).",
		}, []string{"reason"}),
		acceptorBlockedS: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cascade_network_acceptor_blocked_seconds_total",
			Help: "Time the acceptor spent waiting before taking a connection, by reason.",
		}, []string{"reason"}),
		panicsRecovered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cascade_panics_recovered_total",
			Help: "Panics contained to the connection whose request caused them (the connection is closed), by API name.",
		}, []string{"api"}),
	}
}

func (n *network) collectors() []prometheus.Collector {
	return []prometheus.Collector{n.framesRefused, n.connsClosed, n.acceptErrors, n.connsRefused,
		n.acceptorBlocked, n.acceptorBlockedS, n.panicsRecovered}
}

// FrameRefused counts a refused frame; it implements wire.Observer.
func (m *Metrics) FrameRefused(reason string) {
	if m != nil {
		m.net.framesRefused.WithLabelValues(reason).Inc()
	}
}

// ConnectionClosed counts a connection closed by the broker; it implements
// wire.Observer.
func (m *Metrics) ConnectionClosed(reason string) {
	if m != nil {
		m.net.connsClosed.WithLabelValues(reason).Inc()
	}
}

// AcceptError counts a failed accept; it implements wire.Observer.
func (m *Metrics) AcceptError() {
	if m != nil {
		m.net.acceptErrors.Inc()
	}
}

// ConnectionRefused counts a connection refused by a quota; it implements
// wire.Observer.
func (m *Metrics) ConnectionRefused(reason string) {
	if m != nil {
		m.net.connsRefused.WithLabelValues(reason).Inc()
	}
}

// AcceptorBlocked counts a wait of the acceptor; it implements
// wire.Observer.
func (m *Metrics) AcceptorBlocked(reason string, d time.Duration) {
	if m != nil {
		m.net.acceptorBlocked.WithLabelValues(reason).Inc()
		m.net.acceptorBlockedS.WithLabelValues(reason).Add(d.Seconds())
	}
}

// PanicRecovered counts a contained panic; it implements wire.Observer.
func (m *Metrics) PanicRecovered(key int16) {
	if m == nil {
		return
	}
	name := "none"
	if key >= 0 {
		name = apiName(key)
	}
	m.net.panicsRecovered.WithLabelValues(name).Inc()
}
