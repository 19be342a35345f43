package proxy

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrExists and ErrNotFound are returned by Group and Proxy methods naming
// a proxy or toxic that already exists or does not.
var (
	ErrExists   = errors.New("already exists")
	ErrNotFound = errors.New("not found")
)

// Options configure a Group.
type Options struct {
	// Seed derives every toxic's random source.
	Seed uint64
	// ListenHost is where proxies for brokers discovered in metadata
	// listen; default 127.0.0.1.
	ListenHost string
	// NoDiscover stops the group from creating proxies for brokers it
	// finds in metadata; their addresses are then passed on unchanged.
	NoDiscover bool
}

// Group is a set of proxies, one per upstream broker, sharing a seed and
// an address map for rewriting metadata.
type Group struct {
	opt     Options
	mu      sync.Mutex
	proxies map[string]*Proxy
	byUp    map[string]*Proxy // upstream host:port -> proxy
	closed  bool
}

// NewGroup returns an empty group.
func NewGroup(opt Options) *Group {
	if opt.ListenHost == "" {
		opt.ListenHost = "127.0.0.1"
	}
	return &Group{opt: opt, proxies: map[string]*Proxy{}, byUp: map[string]*Proxy{}}
}

// Seed returns the group's seed.
func (g *Group) Seed() uint64 { return g.opt.Seed }

// Proxy is one listener forwarding to one upstream broker.
type Proxy struct {
	g        *Group
	name     string
	upstream string

	mu      sync.Mutex
	listen  string
	ln      net.Listener
	enabled bool
	toxics  []*toxic
	conns   map[*conn]struct{}
}

// Add starts a proxy named name listening on listen (host:port, port 0 for
// any) and forwarding to upstream.
func (g *Group) Add(name, listen, upstream string) (*Proxy, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, errors.New("proxy group closed")
	}
	if _, ok := g.proxies[name]; ok {
		return nil, fmt.Errorf("proxy %s: %w", name, ErrExists)
	}
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		return nil, fmt.Errorf("proxy %s upstream: %w", name, err)
	}
	p := &Proxy{g: g, name: name, upstream: upstream, listen: listen, conns: map[*conn]struct{}{}}
	if err := p.start(); err != nil {
		return nil, err
	}
	g.proxies[name] = p
	g.byUp[upstream] = p
	return p, nil
}

// Get returns the proxy named name, or nil.
func (g *Group) Get(name string) *Proxy {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.proxies[name]
}

// Proxies returns the group's proxies sorted by name.
func (g *Group) Proxies() []*Proxy {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*Proxy, 0, len(g.proxies))
	for _, p := range g.proxies {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// Remove stops and forgets the proxy named name.
func (g *Group) Remove(name string) error {
	g.mu.Lock()
	p, ok := g.proxies[name]
	if ok {
		delete(g.proxies, name)
		delete(g.byUp, p.upstream)
	}
	g.mu.Unlock()
	if !ok {
		return fmt.Errorf("proxy %s: %w", name, ErrNotFound)
	}
	p.stop(true)
	return nil
}

// Reset enables every proxy and removes every toxic, as toxiproxy's
// POST /reset.
func (g *Group) Reset() error {
	var errs []error
	for _, p := range g.Proxies() {
		p.removeAll()
		errs = append(errs, p.SetEnabled(true))
	}
	return errors.Join(errs...)
}

// Close stops every proxy.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	ps := make([]*Proxy, 0, len(g.proxies))
	for _, p := range g.proxies {
		ps = append(ps, p)
	}
	g.mu.Unlock()
	for _, p := range ps {
		p.stop(true)
	}
}

// proxyFor returns the proxy for a broker at host:port, creating one when
// discovery is on.
func (g *Group) proxyFor(host string, port int32) *Proxy {
	addr := net.JoinHostPort(host, strconv.Itoa(int(port)))
	g.mu.Lock()
	p := g.byUp[addr]
	g.mu.Unlock()
	if p != nil || g.opt.NoDiscover {
		return p
	}
	p, err := g.Add("broker-"+addr, net.JoinHostPort(g.opt.ListenHost, "0"), addr)
	if err != nil {
		g.mu.Lock()
		p = g.byUp[addr] // lost a race to another connection
		g.mu.Unlock()
		if p == nil {
			slog.Warn("proxy: cannot proxy discovered broker", "addr", addr, "err", err)
		}
	}
	return p
}

func (g *Group) mapAddr(host string, port int32) (string, int32) {
	p := g.proxyFor(host, port)
	if p == nil {
		return host, port
	}
	h, ps, err := net.SplitHostPort(p.Addr())
	if err != nil {
		return host, port
	}
	n, err := strconv.Atoi(ps)
	if err != nil {
		return host, port
	}
	return h, int32(n)
}

// rewrite replaces broker addresses in Metadata, FindCoordinator and
// DescribeCluster responses with their proxies' addresses, so clients never
// bypass the proxy.
func (g *Group) rewrite(pr *pendingReq, frame []byte) []byte {
	resp, body, err := responseBody(frame, pr.key, pr.version)
	if err != nil || resp.ReadFrom(body) != nil {
		slog.Warn("proxy: cannot decode response to rewrite", "key", pr.key, "version", pr.version, "err", err)
		return frame
	}
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = g.mapAddr(r.Brokers[i].Host, r.Brokers[i].Port)
		}
	case *kmsg.FindCoordinatorResponse:
		if r.Host != "" {
			r.Host, r.Port = g.mapAddr(r.Host, r.Port)
		}
		for i := range r.Coordinators {
			c := &r.Coordinators[i]
			if c.Host != "" {
				c.Host, c.Port = g.mapAddr(c.Host, c.Port)
			}
		}
	case *kmsg.DescribeClusterResponse:
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = g.mapAddr(r.Brokers[i].Host, r.Brokers[i].Port)
		}
	default:
		return frame
	}
	return encodeResponse(pr.corr, resp)
}

// Name returns the proxy's name.
func (p *Proxy) Name() string { return p.name }

// Upstream returns the broker address the proxy forwards to.
func (p *Proxy) Upstream() string { return p.upstream }

// Addr returns the address the proxy listens on.
func (p *Proxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.listen
}

// Enabled reports whether the proxy is listening.
func (p *Proxy) Enabled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.enabled
}

// SetEnabled starts or stops the proxy; stopping closes its connections, as
// toxiproxy's enabled=false. A restarted proxy listens on the same address.
func (p *Proxy) SetEnabled(on bool) error {
	if on {
		return p.start()
	}
	p.stop(false)
	return nil
}

func (p *Proxy) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.enabled {
		return nil
	}
	ln, err := net.Listen("tcp", p.listen)
	if err != nil {
		return fmt.Errorf("proxy %s: %w", p.name, err)
	}
	p.ln, p.listen, p.enabled = ln, ln.Addr().String(), true
	go p.accept(ln)
	return nil
}

func (p *Proxy) stop(removeToxics bool) {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	p.enabled = false
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	if removeToxics {
		p.removeAll()
	}
}

func (p *Proxy) accept(ln net.Listener) {
	for {
		cl, err := ln.Accept()
		if err != nil {
			return
		}
		if p.refuse() {
			if tc, ok := cl.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			cl.Close()
			continue
		}
		go p.serve(cl)
	}
}

func (p *Proxy) serve(cl net.Conn) {
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		slog.Debug("proxy: upstream unreachable", "proxy", p.name, "err", err)
		cl.Close()
		return
	}
	c := newConn(p, cl, up)
	p.mu.Lock()
	if !p.enabled {
		p.mu.Unlock()
		cl.Close()
		up.Close()
		return
	}
	p.conns[c] = struct{}{}
	toxics := p.toxics
	p.mu.Unlock()
	for _, tx := range toxics {
		c.attach(tx)
	}
	c.run()
}

func (p *Proxy) forget(c *conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// attach starts a byte-level toxic on the connection's link of its stream
// right away, so timers (timeout, reset_peer) run without traffic.
func (c *conn) attach(tx *toxic) {
	if _, ok := tx.impl.(Toxic); !ok {
		return
	}
	if tx.spec.Stream == Upstream {
		c.up.stub(tx)
	} else {
		c.down.stub(tx)
	}
}

func (p *Proxy) toxicRand(name string) *Rand {
	h := fnv.New64a()
	h.Write([]byte(p.name))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return &Rand{r: rand.New(rand.NewPCG(p.g.opt.Seed, h.Sum64()))}
}

// AddToxic installs a toxic described as in toxiproxy's JSON. A zero
// Toxicity means 1 (use toxicity in (0, 1) for a fraction of connections).
func (p *Proxy) AddToxic(spec ToxicSpec) error {
	return p.addToxic(spec, spec.Toxicity != 0)
}

func (p *Proxy) addToxic(spec ToxicSpec, toxicitySet bool) error {
	tx, err := newToxic(spec, nil, toxicitySet)
	if err != nil {
		return err
	}
	tx.rnd = p.toxicRand(tx.spec.Name)
	p.mu.Lock()
	for _, o := range p.toxics {
		if o.spec.Name == tx.spec.Name {
			p.mu.Unlock()
			return fmt.Errorf("toxic %s: %w", tx.spec.Name, ErrExists)
		}
	}
	p.toxics = append(append([]*toxic(nil), p.toxics...), tx)
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.attach(tx)
	}
	return nil
}

// RemoveToxic removes the toxic named name; connections it held (a timeout
// blackhole) resume.
func (p *Proxy) RemoveToxic(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, tx := range p.toxics {
		if tx.spec.Name == name {
			p.toxics = append(append([]*toxic(nil), p.toxics[:i]...), p.toxics[i+1:]...)
			close(tx.removed)
			return nil
		}
	}
	return fmt.Errorf("toxic %s: %w", name, ErrNotFound)
}

func (p *Proxy) removeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, tx := range p.toxics {
		close(tx.removed)
	}
	p.toxics = nil
}

// Toxics returns the installed toxics' specs, in order.
func (p *Proxy) Toxics() []ToxicSpec {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ToxicSpec, len(p.toxics))
	for i, tx := range p.toxics {
		out[i] = tx.spec
	}
	return out
}

// Fired returns how many times the Kafka-aware toxic named name has fired.
func (p *Proxy) Fired(name string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, tx := range p.toxics {
		if tx.spec.Name == name {
			return tx.firedCount(), nil
		}
	}
	return 0, fmt.Errorf("toxic %s: %w", name, ErrNotFound)
}

func (p *Proxy) byteToxics(stream string) []*toxic {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*toxic
	for _, tx := range p.toxics {
		if _, ok := tx.impl.(Toxic); ok && tx.spec.Stream == stream {
			out = append(out, tx)
		}
	}
	return out
}

// kafkaAction asks the Kafka-aware toxics, in order, about r; the first
// that matches and fires decides.
func (p *Proxy) kafkaAction(r *Request) (*toxic, Action) {
	p.mu.Lock()
	toxics := p.toxics
	p.mu.Unlock()
	for _, tx := range toxics {
		kt, ok := tx.impl.(KafkaToxic)
		if !ok {
			continue
		}
		if _, refuse := kt.(*RefuseConnectionToxic); refuse {
			continue
		}
		m := kt.(matcher)
		if !m.match().matches(r) || !tx.fire(m.trigger()) {
			continue
		}
		return tx, kt.Act(r)
	}
	return nil, Action{}
}

// refuse reports whether a refuse-connection toxic fires on a new
// connection.
func (p *Proxy) refuse() bool {
	p.mu.Lock()
	toxics := p.toxics
	p.mu.Unlock()
	for _, tx := range toxics {
		if rt, ok := tx.impl.(*RefuseConnectionToxic); ok && tx.fire(&rt.Trigger) {
			return true
		}
	}
	return false
}
