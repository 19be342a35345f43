package wire

import "time"

// Observer receives connection-level counts for metrics. All methods must be
// safe for concurrent use. Reasons are short snake_case words, stable for
// use as metric labels.
type Observer interface {
	BytesIn(n int)
	BytesOut(n int)
	Connection(open bool)
	// FrameRefused counts a frame that closed its connection before it
	// was served: too_large, negative, empty, unknown_api,
	// api_frame_cap, decode_too_large, bad_header.
	FrameRefused(reason string)
	// ConnectionClosed counts a connection the server closed for
	// slowness or a fault: idle (nothing moved either way for
	// connections.max.idle.ms), write_idle (the client stopped reading
	// its responses), panic.
	ConnectionClosed(reason string)
	// AcceptError counts a failed accept (EMFILE and the like).
	AcceptError()
	// ConnectionRefused counts a connection closed at once by a quota:
	// max_connections_per_ip.
	ConnectionRefused(reason string)
	// AcceptorBlocked counts a wait of the acceptor: max_connections
	// (waiting for a connection to close), max_connection_creation_rate
	// (a throttle time).
	AcceptorBlocked(reason string, d time.Duration)
	// PanicRecovered counts a panic contained to its connection; key is
	// the API being served, or -1.
	PanicRecovered(key int16)
}

func (s *Server) refused(reason string) {
	if s.Observer != nil {
		s.Observer.FrameRefused(reason)
	}
}

func (s *Server) connClosed(reason string) {
	if s.Observer != nil {
		s.Observer.ConnectionClosed(reason)
	}
}
