package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/handler"
	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/logging"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/metrics"
	"github.com/cascade-kafka/cascade/broker/partition"
	"github.com/cascade-kafka/cascade/broker/replication"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// Config is what Start needs: the broker's Kafka properties and the process
// services a library user may want to supply.
type Config struct {
	// Broker is the validated broker configuration; nil means
	// config.Default().
	Broker *config.Broker
	// AdminListener is the host:port of the HTTP listener serving
	// /metrics and /debug/pprof/; empty disables it. cmd/cascade sets it
	// from the Cascade-specific property cascade.admin.listener.
	AdminListener string
	// Logger receives the broker's logs; nil means slog.Default().
	Logger *slog.Logger
	// Registry receives the broker's metrics; nil means a fresh registry
	// with the Go and process collectors.
	Registry *prometheus.Registry
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Dial, when set, opens every connection a cluster node makes to a
	// node (itself included): Raft messages to the other voters, broker
	// registration, heartbeats, AlterPartition and forwarded requests to
	// the active controller, replica fetches, transaction requests to
	// other brokers, and the active controller's probe of a silent
	// broker. Nil means a net.Dialer. It is not a Kafka property and
	// cmd/cascade never sets it: broker/brokertest routes each node's
	// traffic to every peer through a link of its own, which it can cut.
	Dial DialFunc
}

// Broker is a running broker.
type Broker struct {
	cfg     Config
	logger  *slog.Logger
	meta    *metadata.Store
	cluster *clusterNode // nil on a single node
	repl    *replication.Manager
	logs    *logDirs
	parts   *partition.Manager
	srv     *wire.Server
	ln      net.Listener
	// first is the first client listener (b.ln) with its security;
	// extra are the single node's other client listeners.
	first     *boundListener
	extra     []*boundListener
	adminLn   net.Listener
	adminSrv  *http.Server
	unsub     func()
	env       *handler.Env
	txn       *handler.TxnCoordinator
	groups    *handler.GroupCoordinator
	serveDone chan struct{}

	closeOnce sync.Once
	closeErr  error
	killed    bool // Kill, not Close: no clean-shutdown steps (kill.go)
}

// Start opens the broker's state and starts serving. It returns once the
// client listener is bound; ctx bounds start-up only.
func Start(ctx context.Context, cfg Config) (*Broker, error) {
	if cfg.Broker == nil {
		cfg.Broker = config.Default()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// Named loggers whose levels BROKER_LOGGER resources change (KIP-412).
	loggers := logging.Attach(cfg.Logger)
	cfg.Logger = loggers.Logger(logging.RootLogger)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
		cfg.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	bc := cfg.Broker
	if len(bc.LogDirs) == 0 {
		return nil, errors.New("broker: log.dirs is empty")
	}
	listeners := bc.BrokerListeners()
	if len(listeners) == 0 && bc.Cluster.Roles.Broker {
		return nil, errors.New("broker: no client listener in listeners")
	}
	if err := checkClusterSecurity(bc); err != nil {
		return nil, err
	}
	b := &Broker{cfg: cfg, logger: cfg.Logger, serveDone: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			b.shutdown()
		}
	}()
	for _, d := range bc.LogDirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("broker: creating log dir: %w", err)
		}
	}
	if !bc.Cluster.Roles.Broker {
		if err := b.startControllerOnly(ctx, loggers); err != nil {
			return nil, err
		}
		ok = true
		return b, nil
	}
	var err error
	clusterID := ""
	if bc.Cluster.Standalone() {
		b.meta, err = metadata.Open(metadataDir(bc), metadata.Options{Broker: bc, Logger: loggers.Logger("cascade.metadata")})
		if err != nil {
			return nil, err
		}
		clusterID = b.meta.Image().ClusterID
	} else {
		if err := checkNodeIdentity(bc, clusterIDFor(bc)); err != nil {
			return nil, err
		}
		b.cluster, err = startClusterNode(ctx, bc, cfg.Dial, loggers)
		if err != nil {
			return nil, err
		}
		b.meta, clusterID = b.cluster.broker, b.cluster.clusterID
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.logs, err = openLogDirs(bc, clusterID, cfg)
	if err != nil {
		return nil, err
	}
	b.parts = partition.NewManager(b.logs)
	fetchSessions := handler.NewFetchSessions(handler.FetchSessionLimits{Slots: int(bc.FetchSessionCacheSlots),
		SessionBytes: bc.FetchSessionMaxBytes, TotalBytes: bc.FetchSessionCacheMaxBytes},
		cfg.Now, rand.New(rand.NewPCG(uint64(cfg.Now().UnixNano()), 0)))
	// The subscription runs inside each metadata commit, so a topic is
	// servable as soon as CreateTopics (or auto-creation) returns.
	var syncErr error
	if b.cluster != nil {
		b.repl = newReplication(bc, b.parts, b.cluster, cfg, loggers.Logger("cascade.replication"))
	}
	b.unsub = b.meta.Subscribe(func(_, next *metadata.Image) {
		if err := b.parts.Sync(specsFor(bc, next, b.cluster != nil)); err != nil {
			syncErr = err
			b.logger.Error("applying metadata to partitions", "err", err)
		}
		if b.repl != nil {
			b.repl.Apply(next)
		}
		fetchSessions.PartitionsChanged()
	})
	if syncErr != nil {
		return nil, fmt.Errorf("broker: opening partitions: %w", syncErr)
	}
	b.logs.warnStrays(b.parts, b.logger)

	m := metrics.New(cfg.Registry)
	metrics.RegisterPartitions(cfg.Registry, b.partitionStats)
	cfg.Registry.MustRegister(newSegmentFileCollector())

	b.ln, err = wire.Listen(ctx, listeners[0].Addr(), int(bc.SocketReceiveBufferBytes))
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	if err := b.bindExtra(ctx, bc, listeners); err != nil {
		return nil, err
	}
	if err := b.secureListeners(bc, listeners[0]); err != nil {
		return nil, err
	}
	host, port := advertised(bc, b.ln.Addr().(*net.TCPAddr))
	metrics.RegisterFetchSessions(cfg.Registry, fetchSessions.Stats)
	env := &handler.Env{
		NodeID:        bc.NodeID,
		Host:          host,
		Port:          port,
		Config:        bc,
		Meta:          b.meta,
		Partitions:    b.parts,
		FetchSessions: fetchSessions,
		Metrics:       m,
		Now:           cfg.Now,
		Logger:        loggers.Logger("cascade.handler"),
		Loggers:       loggers,
		Authorizer:    newAuthorizer(bc, b.meta),
	}
	var dispatcher wire.Dispatcher = env
	if b.cluster != nil {
		env.Cluster = b.cluster
		env.Replication = b.repl
		sel, err := handler.NewReplicaSelector(bc.Cluster.Replication.SelectorClass)
		if err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
		env.ReplicaSelector = sel
		dispatcher = &clusterDispatcher{n: b.cluster, env: env}
	}
	b.txn = handler.NewTxnCoordinator(env, handler.TxnCoordinatorConfig{
		AbortInterval: bc.TransactionAbortInterval, IDExpiration: bc.TransactionalIDExpiration})
	env.Txn = b.txn
	b.groups = handler.NewGroupCoordinator(env, handler.GroupConfig(env))
	if err := b.groups.Start(); err != nil {
		b.logger.Error("loading group metadata", "err", err)
	}
	env.Groups = b.groups
	// After the group coordinator, which listens for the markers that
	// transactions left prepared before a restart are completed with.
	if err := b.txn.Start(); err != nil {
		b.logger.Error("loading transaction state", "err", err)
	}
	b.env = env
	b.srv = &wire.Server{
		Dispatcher:      dispatcher,
		MaxRequestBytes: bc.SocketRequestMaxBytes,
		Budget:          wire.NewBudget(bc.QueuedMaxRequestBytes),
		IdleTimeout:     bc.ConnectionsMaxIdle,
		Quotas: &wire.ConnectionQuotas{
			MaxConnections:      int(bc.MaxConnections),
			MaxConnectionsPerIP: int(bc.MaxConnectionsPerIP),
			PerIPOverrides:      bc.MaxConnectionsPerIPOverrides,
			MaxCreationRate:     int(bc.MaxConnectionCreationRate),
		},
		Now: cfg.Now,
		// socket.receive.buffer.bytes is set on the listener (wire.Listen),
		// so connections inherit it before their handshake; the server
		// sets the same size again on each accepted connection.
		SendBufferBytes:    int(bc.SocketSendBufferBytes),
		ReceiveBufferBytes: int(bc.SocketReceiveBufferBytes),
		Logger:             loggers.Logger("cascade.wire"),
		Observer:           m,
	}
	go func() {
		defer close(b.serveDone)
		if err := b.srv.ServeListener(b.ln, b.first.sec.Wire); err != nil && !errors.Is(err, wire.ErrServerClosed) {
			b.logger.Error("client listener stopped", "err", err)
		}
	}()
	b.serveExtra(bc, env)
	if cfg.AdminListener != "" {
		if err := b.startAdmin(cfg.AdminListener, cfg.Registry); err != nil {
			return nil, err
		}
	}
	if b.cluster != nil {
		b.cluster.previousEpoch = b.logs.previousBrokerEpoch()
		b.cluster.startBrokerSide(env, b.endpoints(bc))
	}
	logUnserved(b.logger, bc, b.cluster != nil)
	b.logger.Info("cascade broker started", "node.id", bc.NodeID, "listener", b.ln.Addr().String(),
		"advertised", net.JoinHostPort(host, strconv.Itoa(int(port))), "log.dirs", bc.LogDirs, "cluster.id", b.meta.Image().ClusterID)
	ok = true
	return b, nil
}

// logUnserved logs, once at start, the configs that are set but change
// nothing in Cascade, and the controller listeners it does not bind: its
// single node runs the metadata quorum in-process, so a port there would
// answer nothing. A cluster node binds its controller listener and honours
// the keys of clusterKeys.
func logUnserved(logger *slog.Logger, bc *config.Broker, cluster bool) {
	for _, n := range bc.NoEffect() {
		if cluster && clusterKeys[n.Key] || cluster && !bc.Cluster.Roles.Controller && observerKeys[n.Key] {
			continue
		}
		logger.Info("configuration has no effect", "key", n.Key, "value", n.Value, "reason", n.Reason)
	}
	if cluster {
		return
	}
	for _, l := range bc.ControllerListeners() {
		logger.Info("controller listener not served", "listener", l.Name, "address", l.Addr(),
			"reason", "this single node runs the metadata quorum in-process and serves no controller RPCs; no port is bound")
	}
}

// metadataDir is where the metadata log lives: the first log dir, as
// Kafka's metadata.log.dir defaults to it.
func metadataDir(bc *config.Broker) string {
	return bc.LogDirs[0] + string(os.PathSeparator) + metadata.DirName
}

// advertised returns the host and port Metadata publishes: the first
// advertised listener, with an ephemeral port 0 replaced by the bound one.
func advertised(bc *config.Broker, bound *net.TCPAddr) (string, int32) {
	if len(bc.AdvertisedListeners) > 0 {
		return advertisedAddr(bc.AdvertisedListeners[0], true, bound)
	}
	return advertisedAddr(config.Listener{}, false, bound)
}

// specsFor lists the partitions this node leads in img, with each topic's
// log configuration. On a cluster node it lists every partition with a
// replica here: a partition whose leader was fenced keeps its log (the
// handlers answer NOT_LEADER_OR_FOLLOWER until it leads again), and only
// leaving the assignment removes it.
func specsFor(bc *config.Broker, img *metadata.Image, cluster bool) []partition.Spec {
	var specs []partition.Spec
	for _, t := range img.Topics() {
		cfg, err := config.TopicLogConfig(bc, t.Configs)
		if err != nil {
			// Configs were validated when written; a failure here
			// means a newer Cascade wrote them. Keep the defaults.
			cfg, _ = config.TopicLogConfig(bc, nil)
		}
		for _, p := range t.Partitions {
			if p.Leader != bc.NodeID && !(cluster && slices.Contains(p.Replicas, bc.NodeID)) {
				continue
			}
			specs = append(specs, partition.Spec{
				TP:          log.TopicPartition{Topic: t.Name, Partition: p.Partition},
				TopicID:     t.ID,
				LeaderEpoch: p.LeaderEpoch,
				Config:      cfg,
				Replicated:  cluster && len(p.Replicas) > 1,
			})
		}
	}
	return specs
}

func (b *Broker) startAdmin(addr string, reg *prometheus.Registry) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("broker: admin listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	b.adminLn = ln
	b.adminSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := b.adminSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.logger.Error("admin listener stopped", "err", err)
		}
	}()
	return nil
}

func (b *Broker) partitionStats() []metrics.PartitionStat {
	parts := b.parts.All()
	out := make([]metrics.PartitionStat, 0, len(parts))
	for _, p := range parts {
		tp := p.TopicPartition()
		st := metrics.PartitionStat{
			Topic: tp.Topic, Partition: tp.Partition,
			SizeBytes:      p.Log().Size(),
			LogStartOffset: p.LogStartOffset(),
			LogEndOffset:   p.LogEndOffset(),
			HighWatermark:  p.HighWatermark(),
			RecoveryPoint:  -1,
			Segments:       -1,
			Flushes:        -1,
		}
		// Optional counters: read them when the log offers them.
		if f, ok := p.Log().(interface{ RecoveryPoint() int64 }); ok {
			st.RecoveryPoint = f.RecoveryPoint()
		}
		if f, ok := p.Log().(interface{ NumSegments() int }); ok {
			st.Segments = int64(f.NumSegments())
		}
		if f, ok := p.Log().(interface{ Flushes() int64 }); ok {
			st.Flushes = f.Flushes()
		}
		out = append(out, st)
	}
	return out
}

// Addr returns the bound client listener address (host:port), the
// bootstrap address clients use; on a controller-only node, which has no
// client listener, the controller listener's.
func (b *Broker) Addr() string {
	if b.ln == nil && b.cluster != nil {
		return b.cluster.ln.Addr().String()
	}
	return b.ln.Addr().String()
}

// AdminAddr returns the bound admin listener address, or "" when disabled.
func (b *Broker) AdminAddr() string {
	if b.adminLn == nil {
		return ""
	}
	return b.adminLn.Addr().String()
}

// Metadata returns the metadata store, for in-process tools and tests.
func (b *Broker) Metadata() *metadata.Store { return b.meta }

// Handlers returns the request dispatcher, for in-process benchmarks of the
// handler paths without a network in between.
func (b *Broker) Handlers() *handler.Env { return b.env }

// RequestBudget returns the queued.max.request.bytes budget of the client
// listener (nil when unbounded), for tests that check the bound.
func (b *Broker) RequestBudget() *wire.Budget { return b.srv.Budget }

// Partitions returns the partition manager, for in-process tools and tests.
func (b *Broker) Partitions() *partition.Manager { return b.parts }

// Close stops serving, waits for connections to end, flushes and closes
// every log and the metadata store. It is safe to call more than once.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.closeErr = b.shutdown()
		b.logger.Info("cascade broker stopped")
	})
	return b.closeErr
}

func (b *Broker) shutdown() error {
	var errs []error
	if b.cluster != nil && b.srv != nil && !b.killed {
		b.cluster.controlledShutdown()
	}
	if b.srv != nil {
		errs = append(errs, b.srv.Close())
		<-b.serveDone
	} else if b.ln != nil {
		errs = append(errs, b.ln.Close())
	}
	if b.srv == nil {
		for _, bl := range b.extra {
			errs = append(errs, bl.ln.Close())
		}
	}
	b.closeSecurity()
	if b.repl != nil {
		b.repl.Close()
	}
	if b.txn != nil {
		b.txn.Close()
	}
	if b.cluster != nil {
		errs = append(errs, b.cluster.close())
	}
	if b.groups != nil {
		b.groups.Close()
	}
	if b.adminSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, b.adminSrv.Shutdown(ctx))
		cancel()
	}
	if b.unsub != nil {
		b.unsub()
	}
	if b.logs != nil && b.killed {
		errs = append(errs, b.logs.abandon())
	} else if b.logs != nil {
		if b.cluster != nil && b.cluster.brokerPart != nil {
			// The next registration proves this shutdown clean.
			b.logs.setBrokerEpoch(b.cluster.epoch.Load())
		}
		errs = append(errs, b.logs.close())
	}
	if b.meta != nil {
		errs = append(errs, b.meta.Close())
	}
	return errors.Join(errs...)
}
