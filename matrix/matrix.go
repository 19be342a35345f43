package matrix

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// Cell statuses.
const (
	StatusPass        = "pass"
	StatusFail        = "fail"
	StatusUnsupported = "unsupported"
	// StatusClientFault is a cell whose client library breaks the
	// scenario's property by itself, whatever the broker: a known defect
	// of the client, named with its evidence in the detail. Like
	// unsupported, it is compared across targets but fails no test.
	StatusClientFault = "client-fault"
)

// ErrClientFault marks a scenario error as a known defect of the client
// library rather than of the broker or the scenario; the cell becomes
// StatusClientFault. Scenarios return it only for defects they list by
// client, so an unexpected failure still fails.
var ErrClientFault = errors.New("known client defect")

// Cell is one result: a scenario run by a client (and, for cross-client
// scenarios, read back by a peer client).
type Cell struct {
	Scenario   string `json:"scenario"`
	Client     string `json:"client"`
	Peer       string `json:"peer,omitempty"`
	Status     string `json:"status"`
	Detail     string `json:"detail,omitempty"`
	DurationMs int64  `json:"duration_ms"`
}

// Key identifies a cell across targets.
func (c Cell) Key() string { return c.Scenario + "|" + c.Client + "|" + c.Peer }

// Scenario is one entry of the catalogue. Exactly one of Run
// and Pair is set: Run is a cell per client, Pair a cell per (producer,
// consumer) pair of clients.
type Scenario struct {
	// ID is stable and sorts in catalogue order, e.g. "2.codec/zstd".
	ID string
	// Title is a short human description for reports.
	Title string
	// Run executes the scenario with one client and returns a detail line
	// for the report (kept for passing cells too).
	Run func(ctx context.Context, e *Env, d driver.Driver) (string, error)
	// Pair executes a cross-client scenario: prod writes, cons reads.
	Pair func(ctx context.Context, e *Env, prod, cons driver.Driver) (string, error)
	// Timeout bounds one cell; zero means 30 seconds.
	Timeout time.Duration
	// Solo cells run alone, with no other cell of the target beside them:
	// those whose property is a timing window of a few seconds (members
	// of several clients rebalancing within a session timeout), which a
	// loaded machine would stretch past the window on any broker.
	Solo bool
	// Peers, when set for a Pair scenario, chooses the consumers that read
	// a producing client's cell among the run's clients (by default every
	// one of them).
	Peers func(client string, clients []string) []string
	// Cluster scenarios run only on the cluster targets
	// (IsClusterTarget): they need several brokers, and the fault ones
	// stop and start nodes (Env.Cluster).
	Cluster bool
	// SingleNode marks a scenario only one broker can run: its setting
	// cannot hold on a cluster target (the ACL cells: a KRaft quorum
	// with StandardAuthorizer forms only when its PLAINTEXT principal,
	// User:ANONYMOUS, is a super user, which every client then is too).
	SingleNode bool
}

// Env is what scenarios share within one target run.
type Env struct {
	// Target is the target name, e.g. "apache-kafka".
	Target string
	// Bootstrap is the target's address.
	Bootstrap string

	// cluster is the running cluster of a cluster target (SetCluster),
	// nil on one broker.
	cluster ClusterInstance

	runID   string
	history *History
	// clients are the clients selected for the run, for scenarios that
	// bring in other clients (mixedPeers).
	clients []string

	// variantMu guards the variant fields, apart from mu: starting a
	// variant cluster takes a minute, and other cells go on meanwhile.
	variantMu    sync.Mutex
	variantStart func(ctx context.Context) (Instance, error)
	variant      Instance
	variantErr   error
	mu           sync.Mutex
	seq          int
	memo         map[string]*memoEntry
	// Parallel is how many cells Run executes at once (at least 1).
	Parallel int
}

// OpenAnother opens a second instance of a client (a second process for an
// out-of-process driver), recorded in the run's history under its own
// name, for scenarios that need two members of one client at once. The
// caller closes it.
func (e *Env) OpenAnother(ctx context.Context, client string) (driver.Driver, error) {
	open, ok := driver.Lookup(client)
	if !ok {
		return nil, fmt.Errorf("no driver registered for client %q", client)
	}
	d, err := open(ctx, e.Bootstrap)
	if err != nil {
		return nil, fmt.Errorf("open a second %s: %w", client, err)
	}
	e.mu.Lock()
	e.seq++
	name := fmt.Sprintf("%s@%s-extra-%d", client, e.Target, e.seq)
	e.mu.Unlock()
	return Record(d, e.history, name), nil
}

// ProcessOpener, when set, returns an opener that runs an in-process Go
// client's driver in a child process instead (a driver program speaking
// the protocol), or false for a client it does not run. The matrix's test
// sets it (process_test.go); crash cells need it, since only a process can
// be killed.
var ProcessOpener func(client string) (driver.Opener, bool)

// OpenKillable opens another instance of client in its own process, so a
// scenario can kill it (a crash), recorded in the run's history under its
// own name. The caller closes it; Close after Kill only reaps.
func (e *Env) OpenKillable(ctx context.Context, client string) (driver.Driver, driver.Killer, error) {
	open, ok := driver.Opener(nil), false
	if ProcessOpener != nil {
		open, ok = ProcessOpener(client)
	}
	if !ok {
		if open, ok = driver.Lookup(client); !ok {
			return nil, nil, fmt.Errorf("no driver registered for client %q", client)
		}
	}
	d, err := open(ctx, e.Bootstrap)
	if err != nil {
		return nil, nil, fmt.Errorf("open a %s process: %w", client, err)
	}
	k, ok := d.(driver.Killer)
	if !ok {
		d.Close()
		return nil, nil, fmt.Errorf("%s runs in this process here and cannot be killed; a crash cell needs matrix.ProcessOpener", client)
	}
	e.mu.Lock()
	e.seq++
	name := fmt.Sprintf("%s@%s-crash-%d", client, e.Target, e.seq)
	e.mu.Unlock()
	return Record(d, e.history, name), k, nil
}

// variantStartTimeout bounds the start of a variant instance: a second
// three-node Apache Kafka cluster beside the first takes up to a minute on
// two loaded cores.
const variantStartTimeout = 3 * time.Minute

// SetVariant gives the Env a way to start the target's variant instance
// (the same target with VariantOverrides), started on first use by
// Variant and stopped by StopVariant.
func (e *Env) SetVariant(start func(ctx context.Context) (Instance, error)) {
	e.variantMu.Lock()
	defer e.variantMu.Unlock()
	e.variantStart = start
}

// Variant returns the bootstrap address of the target's variant instance,
// starting it on first use; without SetVariant, or when the target cannot
// be started with other settings, the error wraps ErrTargetUnavailable.
func (e *Env) Variant(ctx context.Context) (string, error) {
	e.variantMu.Lock()
	defer e.variantMu.Unlock()
	if e.variant != nil {
		return e.variant.Bootstrap(), nil
	}
	if e.variantErr != nil {
		return "", e.variantErr
	}
	if e.variantStart == nil {
		e.variantErr = fmt.Errorf("%w: %s: no variant instance (Env.SetVariant) in this run", ErrTargetUnavailable, e.Target)
		return "", e.variantErr
	}
	// The start outlives the cell that asked first (its context ends
	// with it); the cells after it share the instance.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), variantStartTimeout)
	defer cancel()
	inst, err := e.variantStart(sctx)
	if err != nil {
		e.variantErr = fmt.Errorf("start the %s variant (%v): %w", e.Target, VariantOverridesFor(e.Target), err)
		return "", e.variantErr
	}
	e.variant = inst
	return inst.Bootstrap(), nil
}

// StopVariant stops the variant instance if Variant started one.
func (e *Env) StopVariant() error {
	e.variantMu.Lock()
	defer e.variantMu.Unlock()
	if e.variant == nil {
		return nil
	}
	err := e.variant.Stop()
	e.variant = nil
	return err
}

// OpenOn opens another instance of client connected to bootstrap (the
// variant instance), recorded in the run's history under its own name.
// The caller closes it.
func (e *Env) OpenOn(ctx context.Context, client, bootstrap string) (driver.Driver, error) {
	open, ok := driver.Lookup(client)
	if !ok {
		return nil, fmt.Errorf("no driver registered for client %q", client)
	}
	d, err := open(ctx, bootstrap)
	if err != nil {
		return nil, fmt.Errorf("open %s on %s: %w", client, bootstrap, err)
	}
	e.mu.Lock()
	e.seq++
	name := fmt.Sprintf("%s@%s-variant-%d", client, e.Target, e.seq)
	e.mu.Unlock()
	return Record(d, e.history, name), nil
}

// SetCluster tells the Env that its target is the cluster c: scenarios
// create topics of ClusterNodes replicas (ReplicationFactor) and the
// cluster scenarios reach its nodes (Cluster).
func (e *Env) SetCluster(c ClusterInstance) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cluster = c
}

// Cluster returns the target's cluster, or nil when the target is one
// broker (or an external cluster the matrix cannot control).
func (e *Env) Cluster() ClusterInstance {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cluster
}

// Brokers is how many brokers the target has: ClusterNodes on a cluster
// target, else 1.
func (e *Env) Brokers() int {
	if e.Cluster() != nil {
		return ClusterNodes
	}
	return 1
}

// ReplicationFactor is the replication factor of the scenarios' topics:
// every broker of the target holds a replica (three on a cluster target,
// as its default.replication.factor says), so that leader moves and
// acks=all with min.insync.replicas=2 are exercised by every cell.
func (e *Env) ReplicationFactor() int16 { return int16(e.Brokers()) }

// Seeds returns the bootstrap address split into its host:port entries,
// for the clients the scenarios open themselves (kgo.SeedBrokers takes
// one address per argument).
func (e *Env) Seeds() []string { return splitList(e.Bootstrap, "") }

// NewEnv returns an Env for one target run.
func NewEnv(target, bootstrap string) *Env {
	var b [3]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	return &Env{Target: target, Bootstrap: bootstrap, runID: hex.EncodeToString(b[:]), memo: map[string]*memoEntry{}}
}

// Topic returns a fresh topic name for this run, so cells never share
// topics by accident, even on an external cluster used before.
func (e *Env) Topic(prefix string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	r := strings.NewReplacer("/", "-", "=", "-", " ", "-")
	return fmt.Sprintf("m-%s-%s-%d", r.Replace(prefix), e.runID, e.seq)
}

// Memo returns the value stored under key, computing it with f on first
// use. Cross-client scenarios use it to produce a data set once per
// producer and read it with every consumer. An error is memoised too.
// Cells run concurrently, so a second caller of a key still being computed
// waits for the first one's result instead of computing it again.
func (e *Env) Memo(key string, f func() (any, error)) (any, error) {
	e.mu.Lock()
	m, ok := e.memo[key]
	if !ok {
		m = &memoEntry{done: make(chan struct{})}
		e.memo[key] = m
	}
	e.mu.Unlock()
	if ok {
		<-m.done
		return m.v, m.err
	}
	defer close(m.done)
	m.v, m.err = f()
	return m.v, m.err
}

// memoEntry is one Memo key: its result once done is closed.
type memoEntry struct {
	done chan struct{}
	v    any
	err  error
}

// Run executes scenarios for clients against one target instance and
// returns the cells in a stable order and each opened client's library
// description. Progress lines go to progress.
// Drivers are opened once per client and shared by that client's cells;
// a client whose driver cannot start fails all its cells with the reason.
func Run(ctx context.Context, e *Env, clients []string, scenarios []Scenario, h *History, progress io.Writer) ([]Cell, map[string]string) {
	e.history = h
	e.clients = clients
	drivers := map[string]driver.Driver{}
	infos := map[string]string{}
	openErr := map[string]error{}
	for i, c := range clients {
		open, ok := driver.Lookup(c)
		if !ok {
			openErr[c] = fmt.Errorf("no driver registered for client %q (registered: %s)", c, strings.Join(driver.Clients(), ", "))
			continue
		}
		// Generous: an out-of-process driver provisions its runtime (a
		// virtualenv, a Maven build) on first use inside Open.
		octx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		d, err := open(octx, e.Bootstrap)
		cancel()
		if err != nil {
			openErr[c] = err
			continue
		}
		defer d.Close()
		info := d.Info()
		infos[c] = fmt.Sprintf("%s (default partitioner %s)", info.Library, info.Partitioner)
		drivers[c] = Record(d, h, fmt.Sprintf("%s@%s-%d", c, e.Target, i))
	}

	var plan []plannedCell
	for _, s := range scenarios {
		s := s
		for _, c := range clients {
			if s.Pair == nil {
				d := drivers[c]
				plan = append(plan, plannedCell{s: s, client: c, run: func(ctx context.Context) (string, error) { return s.Run(ctx, e, d) }})
				continue
			}
			peers := clients
			if s.Peers != nil {
				peers = s.Peers(c, clients)
			}
			for _, p := range peers {
				prod, cons := drivers[c], drivers[p]
				plan = append(plan, plannedCell{s: s, client: c, peer: p, run: func(ctx context.Context) (string, error) { return s.Pair(ctx, e, prod, cons) }})
			}
		}
	}

	var (
		mu    sync.Mutex
		cells []Cell
		n     int
	)
	runCell := func(pc plannedCell) {
		s, client, peer := pc.s, pc.client, pc.peer
		cell := Cell{Scenario: s.ID, Client: client, Peer: peer}
		start := time.Now()
		if err := openErr[client]; err != nil {
			cell.Status, cell.Detail = StatusFail, "driver did not start: "+err.Error()
		} else if err := openErr[peer]; peer != "" && err != nil {
			cell.Status, cell.Detail = StatusFail, "peer driver did not start: "+err.Error()
		} else {
			timeout := s.Timeout
			if timeout == 0 {
				timeout = 30 * time.Second
			}
			cctx, cancel := context.WithTimeout(ctx, timeout)
			detail, err := safeRun(cctx, pc.run)
			cancel()
			cell.Detail = detail
			switch {
			case errors.Is(err, driver.ErrUnsupported):
				cell.Status, cell.Detail = StatusUnsupported, err.Error()
			case errors.Is(err, ErrClientFault):
				cell.Status, cell.Detail = StatusClientFault, err.Error()
			case err != nil:
				cell.Status = StatusFail
				cell.Detail = joinDetail(err.Error(), detail)
			default:
				cell.Status = StatusPass
			}
		}
		cell.DurationMs = time.Since(start).Milliseconds()
		mu.Lock()
		defer mu.Unlock()
		n++
		cells = append(cells, cell)
		if progress != nil {
			who := client
			if peer != "" {
				who += " -> " + peer
			}
			line := fmt.Sprintf("[%s %d/%d] %-28s %-42s %-11s %5dms", e.Target, n, len(plan), s.ID, who, cell.Status, cell.DurationMs)
			if cell.Status != StatusPass && cell.Detail != "" {
				line += "  " + firstLine(cell.Detail, 160)
			}
			fmt.Fprintln(progress, line)
		}
	}
	schedule(plan, e.Parallel, runCell)
	SortCells(cells)
	return cells, infos
}

// plannedCell is one cell waiting to run: the scenario, the client that
// runs it, the peer that reads for a cross-client scenario, and the call.
type plannedCell struct {
	s            Scenario
	client, peer string
	run          func(context.Context) (string, error)
}

// schedule runs the cells of plan, up to parallel at once, in catalogue
// order as far as the drivers allow: a cell holds its client's driver (and
// its peer's) for as long as it runs, so that no driver ever serves two
// cells at once and every cell sees its clients as a sequential run would.
// Cells share nothing else (each makes its own topics and groups), so the
// run takes about as long as its longest chain of cells on one driver
// instead of the sum of all cells.
func schedule(plan []plannedCell, parallel int, run func(plannedCell)) {
	if parallel < 1 {
		parallel = 1
	}
	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		busy    = map[string]bool{}
		started = make([]bool, len(plan))
		running int
		solo    bool // a solo cell is running
		wg      sync.WaitGroup
	)
	free := func(pc plannedCell) bool { return !busy[pc.client] && (pc.peer == "" || !busy[pc.peer]) }
	mu.Lock()
	for left := len(plan); left > 0; {
		next := -1
		if running < parallel && !solo {
			for i, pc := range plan {
				if started[i] {
					continue
				}
				if pc.s.Solo {
					// A solo cell waits for the others to finish, and
					// none starts after it until it is done.
					if running == 0 {
						next = i
					}
					break
				}
				if free(pc) {
					next = i
					break
				}
			}
		}
		if next < 0 {
			cond.Wait()
			continue
		}
		pc := plan[next]
		started[next] = true
		solo = pc.s.Solo
		busy[pc.client], running, left = true, running+1, left-1
		if pc.peer != "" {
			busy[pc.peer] = true
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(pc)
			mu.Lock()
			busy[pc.client], running = false, running-1
			if pc.s.Solo {
				solo = false
			}
			if pc.peer != "" {
				busy[pc.peer] = false
			}
			cond.Broadcast()
			mu.Unlock()
		}()
	}
	mu.Unlock()
	wg.Wait()
}

// safeRun turns a panic inside a scenario or driver into a failed cell, so
// one bad client cannot stop the whole matrix.
func safeRun(ctx context.Context, f func(context.Context) (string, error)) (detail string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f(ctx)
}

func joinDetail(a, b string) string {
	if b == "" {
		return a
	}
	return a + " (" + b + ")"
}

func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// SortCells orders cells by scenario, client and peer.
func SortCells(cells []Cell) {
	sort.SliceStable(cells, func(i, j int) bool {
		a, b := cells[i], cells[j]
		if a.Scenario != b.Scenario {
			return a.Scenario < b.Scenario
		}
		if a.Client != b.Client {
			return a.Client < b.Client
		}
		return a.Peer < b.Peer
	})
}
