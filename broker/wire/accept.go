package wire

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"time"
)

// ConnectionQuotas are the connection limits of Kafka's ConnectionQuotas,
// with Kafka's meaning. Use MaxInt32 (Kafka's default) for no limit.
type ConnectionQuotas struct {
	// MaxConnections is max.connections: when this many connections are
	// open, the listener stops accepting until one closes.
	MaxConnections int
	// MaxConnectionsPerIP is max.connections.per.ip: a new connection
	// from an address that already has this many is closed at once.
	MaxConnectionsPerIP int
	// PerIPOverrides is max.connections.per.ip.overrides: per-host or
	// per-address limits that replace MaxConnectionsPerIP. Host names are
	// resolved when the server starts serving, as Kafka resolves them
	// when it starts (InetAddress.getByName).
	PerIPOverrides map[string]int
	// MaxCreationRate is max.connection.creation.rate, new connections a
	// second over the broker; above it, the acceptor waits out a throttle
	// time before handing over each new connection.
	MaxCreationRate int
}

// Quota window of Kafka's connection-rate sensor: quota.window.num (11)
// samples of quota.window.size.seconds (1 s); throttle times are capped at
// one window, as ConnectionQuotas' maxThrottleTimeMs.
const (
	rateSamples = 11
	rateWindow  = time.Second
)

// quotas is the state of a server's ConnectionQuotas. The nil *quotas
// limits nothing.
type quotas struct {
	cfg       ConnectionQuotas
	overrides map[netip.Addr]int

	mu      sync.Mutex
	total   int
	perIP   map[netip.Addr]int
	changed chan struct{} // closed and replaced when a connection ends
	rate    *creationRate
}

// newQuotas resolves cfg's override hosts; nil cfg limits nothing.
func newQuotas(ctx context.Context, cfg *ConnectionQuotas) (*quotas, error) {
	if cfg == nil {
		return nil, nil
	}
	q := &quotas{cfg: *cfg, overrides: map[netip.Addr]int{}, perIP: map[netip.Addr]int{}, changed: make(chan struct{})}
	for host, n := range cfg.PerIPOverrides {
		if a, err := netip.ParseAddr(host); err == nil {
			q.overrides[a.Unmap()] = n
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		addrs, err := net.DefaultResolver.LookupNetIP(rctx, "ip", host)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("wire: max.connections.per.ip.overrides: resolving %q: %w", host, err)
		}
		for _, a := range addrs {
			q.overrides[a.Unmap()] = n
		}
	}
	if cfg.MaxCreationRate < math.MaxInt32 {
		q.rate = &creationRate{bound: float64(cfg.MaxCreationRate)}
	}
	return q, nil
}

// acquireSlot waits until fewer than max.connections are open and takes a
// slot, as Kafka's ConnectionQuotas.waitForConnectionSlot; blocked is told
// how long the wait was. Unlike Kafka's Acceptor, which waits with the
// next connection already accepted, the wait is before accept, so no
// accepted socket is held unserved.
func (q *quotas) acquireSlot(ctx context.Context, blocked func(time.Duration)) error {
	if q == nil {
		return nil
	}
	var start time.Time
	for {
		q.mu.Lock()
		if q.total < q.cfg.MaxConnections {
			q.total++
			q.mu.Unlock()
			if !start.IsZero() {
				blocked(time.Since(start))
			}
			return nil
		}
		ch := q.changed
		q.mu.Unlock()
		if start.IsZero() {
			start = time.Now()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// releaseSlot gives back a slot that no connection took.
func (q *quotas) releaseSlot() {
	if q == nil {
		return
	}
	q.mu.Lock()
	q.total--
	q.notifyLocked()
	q.mu.Unlock()
}

func (q *quotas) notifyLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// admitIP counts a new connection from ip, which holds a slot already,
// and reports whether it may stay: as ConnectionQuotas.inc, a connection
// beyond its address's limit (the override, or max.connections.per.ip) is
// refused. A refused connection gives its slot back.
func (q *quotas) admitIP(ip netip.Addr) bool {
	if q == nil {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	limit, ok := q.overrides[ip]
	if !ok {
		limit = q.cfg.MaxConnectionsPerIP
	}
	if q.perIP[ip] >= limit {
		q.total--
		q.notifyLocked()
		return false
	}
	q.perIP[ip]++
	return true
}

// closed counts the end of a connection admitted from ip.
func (q *quotas) closed(ip netip.Addr) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.perIP[ip]--; q.perIP[ip] <= 0 {
		delete(q.perIP, ip)
	}
	q.total--
	q.notifyLocked()
}

// recordCreation records a new connection in the creation-rate sensor and
// returns how long the acceptor must wait before handing it over.
func (q *quotas) recordCreation(now time.Time) time.Duration {
	if q == nil || q.rate == nil {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.rate.record(now)
}

// creationRate is Kafka's Rate over a SampledStat of rateSamples windows,
// with the quota check of Sensor.record and the throttle time of
// QuotaUtils.boundedThrottleTime: after recording, a rate above bound gives
// a throttle of (rate - bound) / bound × the rate's window, at most one
// window.
type creationRate struct {
	bound   float64
	samples [rateSamples]rateSample
	cur     int
	started bool
}

type rateSample struct {
	start time.Time
	n     float64
}

func (r *creationRate) record(now time.Time) time.Duration {
	if !r.started {
		for i := range r.samples {
			r.samples[i] = rateSample{start: now}
		}
		r.started = true
	}
	if now.Sub(r.samples[r.cur].start) >= rateWindow {
		r.cur = (r.cur + 1) % rateSamples
		r.samples[r.cur] = rateSample{start: now}
	}
	r.samples[r.cur].n++
	// SampledStat.purgeObsoleteSamples: a sample older than all the
	// windows together counts nothing.
	oldest := now
	var total float64
	for i := range r.samples {
		s := &r.samples[i]
		if now.Sub(s.start) >= rateSamples*rateWindow {
			*s = rateSample{start: now}
		}
		total += s.n
		if s.start.Before(oldest) {
			oldest = s.start
		}
	}
	// Rate.windowSize: the elapsed time, but at least samples-1 full
	// windows, so a young sensor does not report a burst as a huge rate.
	elapsed := now.Sub(oldest)
	if full := elapsed / rateWindow; full < rateSamples-1 {
		elapsed += (rateSamples - 1 - full) * rateWindow
	}
	rate := total / elapsed.Seconds()
	if rate <= r.bound {
		return 0
	}
	throttle := time.Duration((rate - r.bound) / r.bound * float64(elapsed))
	return min(throttle.Round(time.Millisecond), rateWindow)
}

// remoteIP returns c's peer address, or the zero Addr for a connection
// that has none (a pipe), which quotas count as one address.
func remoteIP(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// acceptLog rate-limits the log of failing accepts to one line every
// acceptLogEvery, with the count of the failures not logged.
type acceptLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

const acceptLogEvery = 10 * time.Second

// acceptFailed counts and logs a failed accept.
func (s *Server) acceptFailed(err error, retry time.Duration) {
	if s.Observer != nil {
		s.Observer.AcceptError()
	}
	l := &s.accept
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < acceptLogEvery {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	s.Logger.Error("accepting a connection failed; retrying", "err", err, "retry_in", retry, "failures_not_logged", n)
}

// Serve accepts connections on ln until ln is closed or Close is called; it
// returns ErrServerClosed after Close. A failing accept (EMFILE, ENFILE,
// ENOBUFS, or anything else but a closed listener) is counted, logged at
// most every 10 s and retried after a delay of 5 ms doubling to 1 s, as
// net/http's Server does, so the listener recovers once descriptors free
// up. The connection quotas are applied as Kafka's Acceptor does. Its
// connections are PLAINTEXT; ServeListener serves a secured listener.
func (s *Server) Serve(ln net.Listener) error { return s.ServeListener(ln, Listener{}) }

// ServeListener is Serve for a listener secured as l says (TLS, SASL, or
// both); a Server may serve several listeners at once, each with its own.
func (s *Server) ServeListener(ln net.Listener, l Listener) error {
	s.mu.Lock()
	s.init()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	if s.quotas == nil && s.Quotas != nil {
		q, err := newQuotas(s.ctx, s.Quotas)
		if err != nil {
			s.mu.Unlock()
			ln.Close()
			return err
		}
		s.quotas = q
	}
	q := s.quotas
	s.mu.Unlock()
	now := s.Now
	if now == nil {
		now = time.Now
	}
	blocked := func(reason string) func(time.Duration) {
		return func(d time.Duration) {
			if s.Observer != nil {
				s.Observer.AcceptorBlocked(reason, d)
			}
		}
	}
	var delay time.Duration
	for {
		if err := q.acquireSlot(s.ctx, blocked("max_connections")); err != nil {
			return ErrServerClosed
		}
		c, err := ln.Accept()
		if err != nil {
			q.releaseSlot()
			if s.isClosed() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.acceptFailed(err, delay)
			if !s.sleep(delay) {
				return ErrServerClosed
			}
			continue
		}
		delay = 0
		if d := q.recordCreation(now()); d > 0 {
			// As ConnectionQuotas.waitForConnectionSlot: the acceptor
			// waits out the throttle with the new connection in hand.
			blocked("max_connection_creation_rate")(d)
			if !s.sleep(d) {
				q.releaseSlot()
				c.Close()
				return ErrServerClosed
			}
		}
		ip := remoteIP(c)
		if !q.admitIP(ip) {
			// Counted before the close, so whoever sees the close sees
			// the count.
			if s.Observer != nil {
				s.Observer.ConnectionRefused("max_connections_per_ip")
			}
			c.Close()
			s.Logger.Debug("connection refused: max.connections.per.ip reached", "remote", c.RemoteAddr().String())
			continue
		}
		if err := tuneConn(c, s.SendBufferBytes, s.ReceiveBufferBytes); err != nil {
			s.Logger.Warn("setting socket options", "remote", c.RemoteAddr().String(), "err", err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			q.closed(ip)
			return ErrServerClosed
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(c, &l)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			q.closed(ip)
		}()
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// sleep waits d, or until Close; it reports whether the server is open.
func (s *Server) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}
