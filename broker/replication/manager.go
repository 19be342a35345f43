package replication

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/partition"
	"github.com/cascade-kafka/cascade/broker/replica"
)

// Config is the node's replication settings, as Kafka's ReplicationConfigs.
type Config struct {
	// NodeID is node.id.
	NodeID int32
	// Listener is the inter-broker listener name whose endpoint of the
	// leader's registration followers fetch from.
	Listener string
	// MinInsyncReplicas is the broker's min.insync.replicas; a topic's
	// config overrides it.
	MinInsyncReplicas int32
	// LagTimeMax is replica.lag.time.max.ms.
	LagTimeMax time.Duration
	// FetchMaxBytes is replica.fetch.max.bytes (per partition),
	// FetchResponseMaxBytes replica.fetch.response.max.bytes, FetchMinBytes
	// replica.fetch.min.bytes, FetchWaitMax replica.fetch.wait.max.ms,
	// FetchBackoff replica.fetch.backoff.ms.
	FetchMaxBytes         int32
	FetchResponseMaxBytes int32
	FetchMinBytes         int32
	FetchWaitMax          time.Duration
	FetchBackoff          time.Duration
	// SocketTimeout is replica.socket.timeout.ms.
	SocketTimeout time.Duration
	// NumFetchers is num.replica.fetchers.
	NumFetchers int
	Logger      *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Dial, when set, opens the connections to the leaders; nil means
	// franz-go's dialer. The dial timeout comes with its context.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// Controller is how a leader reaches the active controller.
type Controller interface {
	// AlterPartition sends r to the active controller and returns its
	// answer.
	AlterPartition(ctx context.Context, r *kmsg.AlterPartitionRequest) (*kmsg.AlterPartitionResponse, error)
	// BrokerEpoch is this broker's epoch, -1 until registered.
	BrokerEpoch() int64
}

// ErrRequestTimedOut is an acks=all produce whose records the high
// watermark did not reach within the request's timeout (REQUEST_TIMED_OUT).
var ErrRequestTimedOut = errors.New("replication: acks=all timed out waiting for the ISR")

// Manager replicates this node's partitions that have more than one
// replica.
type Manager struct {
	cfg   Config
	parts *partition.Manager
	ctl   Controller
	log   *slog.Logger

	mu       sync.Mutex
	img      *metadata.Image
	states   map[log.TopicPartition]*pstate
	fetchers map[fetcherKey]*fetcher
	clients  *clients

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// pstate is one replicated partition: its state machine and the partition
// it drives. mu guards st.
type pstate struct {
	tp      log.TopicPartition
	topicID [16]byte
	p       *partition.Partition

	mu     sync.Mutex
	st     *replica.State
	notify chan struct{} // closed at every change acks waiters look at
	gone   bool
}

// New returns a manager of the partitions of parts; it starts its ISR
// expiration task at once and fetchers as the image makes this node a
// follower.
func New(cfg Config, parts *partition.Manager, ctl Controller) *Manager {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.NumFetchers = max(cfg.NumFetchers, 1)
	m := &Manager{cfg: cfg, parts: parts, ctl: ctl, log: cfg.Logger,
		states: map[log.TopicPartition]*pstate{}, fetchers: map[fetcherKey]*fetcher{}}
	m.clients = newClients(cfg)
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.wg.Go(m.expireISR)
	return m
}

// Close stops the fetchers and the ISR expiration task.
func (m *Manager) Close() {
	m.cancel()
	m.mu.Lock()
	for k, f := range m.fetchers {
		f.stop()
		delete(m.fetchers, k)
	}
	m.mu.Unlock()
	m.wg.Wait()
	m.clients.close()
}

func (m *Manager) now() time.Time { return m.cfg.Now() }

// brokerView is the image's brokers as the state machine sees them.
func brokerView(img *metadata.Image) map[int32]replica.BrokerStatus {
	view := map[int32]replica.BrokerStatus{}
	for _, b := range img.Brokers() {
		view[b.ID] = replica.BrokerStatus{Epoch: b.Epoch, Fenced: b.Fenced, ShuttingDown: b.InControlledShutdown}
	}
	return view
}

// minISR is the topic's min.insync.replicas, else the broker's.
func (m *Manager) minISR(t *metadata.Topic) int {
	if v, ok := t.Configs["min.insync.replicas"]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return int(max(m.cfg.MinInsyncReplicas, 1))
}

// Apply brings the replicated partitions in step with img, as Kafka's
// ReplicaManager.applyDelta: a partition this node leads becomes leader
// (its epoch starts at the log end), one it follows is handed to the
// fetcher of its leader, one it no longer holds is forgotten. It runs after
// the partition manager's Sync of the same image, so every partition named
// here is open.
func (m *Manager) Apply(img *metadata.Image) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx.Err() != nil {
		return
	}
	m.img = img
	view := brokerView(img)
	now := m.now()
	seen := map[log.TopicPartition]bool{}
	for _, t := range img.Topics() {
		for _, ip := range t.Partitions {
			tp := log.TopicPartition{Topic: t.Name, Partition: ip.Partition}
			if len(ip.Replicas) < 2 || !slices.Contains(ip.Replicas, m.cfg.NodeID) {
				if s := m.states[tp]; s != nil && slices.Equal(ip.Replicas, []int32{m.cfg.NodeID}) {
					m.leadAloneLocked(s, ip)
				}
				continue
			}
			p := m.parts.Get(tp)
			if p == nil {
				continue // the log failed to open: an offline replica
			}
			seen[tp] = true
			s := m.states[tp]
			if s != nil && (s.p != p || s.topicID != t.ID) {
				m.forgetLocked(s)
				s = nil
			}
			if s == nil {
				st := replica.New(replica.Config{BrokerID: m.cfg.NodeID, MinInSyncReplicas: m.minISR(t),
					ReplicaLagTimeMax: m.cfg.LagTimeMax})
				st.Restore(p.LogStartOffset(), p.LogEndOffset(), p.HighWatermark())
				s = &pstate{tp: tp, topicID: t.ID, p: p, st: st, notify: make(chan struct{})}
				m.states[tp] = s
			}
			s.mu.Lock()
			s.st.SetMinInSyncReplicas(m.minISR(t))
			s.mu.Unlock()
			m.applyPartition(s, ip, view, now)
		}
	}
	for tp, s := range m.states {
		if !seen[tp] {
			m.forgetLocked(s)
		}
	}
}

// leadAloneLocked hands a replicated partition whose replicas shrank to
// this node alone (a reassignment) to the single-replica path: it leads
// from the new epoch, and as the whole ISR everything in its log is
// committed, as a Kafka leader whose ISR is itself advances the high
// watermark to its log end. m.mu is held.
func (m *Manager) leadAloneLocked(s *pstate, ip metadata.Partition) {
	m.forgetLocked(s)
	if ip.Leader != m.cfg.NodeID || m.parts.Get(s.tp) != s.p {
		return
	}
	if err := s.p.MakeLeader(ip.LeaderEpoch); err != nil && !errors.Is(err, partition.ErrDeleted) {
		m.log.Error("starting leader epoch", "topic", s.tp.Topic, "partition", s.tp.Partition, "err", err)
		return
	}
	s.p.AdvanceHighWatermark(s.p.LogEndOffset())
	m.log.Info("became leader", "topic", s.tp.Topic, "partition", s.tp.Partition, "leader_epoch", ip.LeaderEpoch, "isr", ip.ISR)
}

// applyPartition applies one partition's registration. m.mu is held.
func (m *Manager) applyPartition(s *pstate, ip metadata.Partition, view map[int32]replica.BrokerStatus, now time.Time) {
	ps := replica.PartitionState{Leader: ip.Leader, LeaderEpoch: ip.LeaderEpoch, PartitionEpoch: ip.PartitionEpoch,
		Replicas: slices.Clone(ip.Replicas), ISR: slices.Clone(ip.ISR),
		LeaderRecovery: replica.LeaderRecoveryState(ip.LeaderRecoveryState)}
	s.mu.Lock()
	s.st.SetBrokers(view)
	wasRole, wasLeader, wasEpoch := s.st.Role(), s.st.Leader(), s.st.LeaderEpoch()
	wasRecovery := s.st.LeaderRecovery()
	s.st.LogStartMoved(s.p.LogStartOffset())
	eff := s.st.MetadataChange(ps, epochCache(s.p), now, s.p.LogEndOffset())
	if r := s.st.LeaderRecovery(); r != wasRecovery && s.st.Role() != replica.RoleLeader {
		m.log.Info("leader recovery state changed", "topic", s.tp.Topic, "partition", s.tp.Partition,
			"leader", ps.Leader, "leader_epoch", ps.LeaderEpoch, "leader_recovery_state", r.String())
	}
	if eff.Recovered {
		// As Kafka's Partition.makeLeader: no log recovery to run.
		m.log.Info("partition was marked as recovering after an unclean election; marking it recovered",
			"topic", s.tp.Topic, "partition", s.tp.Partition, "leader_epoch", ps.LeaderEpoch)
	}
	if s.st.Role() != replica.RoleLeader {
		// Before a follower's first fetch, and before any append
		// checked against the old role is written with the new
		// image's epoch: the partition's appends stop at once.
		s.p.StopLeading()
	}
	m.applyEffectsLocked(s, eff)
	role, leader, epoch := s.st.Role(), s.st.Leader(), s.st.LeaderEpoch()
	s.wakeLocked()
	s.mu.Unlock()
	if role == wasRole && leader == wasLeader && epoch == wasEpoch {
		return
	}
	m.removeFromFetcherLocked(s.tp)
	switch role {
	case replica.RoleLeader:
		m.log.Info("became leader", "topic", s.tp.Topic, "partition", s.tp.Partition, "leader_epoch", epoch, "isr", ip.ISR)
	case replica.RoleFollower:
		if leader >= 0 {
			m.addToFetcherLocked(s, leader, epoch)
		}
	}
}

// epochCache is the partition's latest leader epoch as the state machine's
// cache argument: only the latest entry is read by the follower's fetch
// position.
func epochCache(p *partition.Partition) []replica.EpochEntry {
	e := p.Log().LatestEpoch()
	if e < 0 {
		return nil
	}
	return []replica.EpochEntry{{Epoch: e, StartOffset: replica.UndefinedOffset}}
}

// applyEffectsLocked carries out what the state machine asked. s.mu is held.
func (m *Manager) applyEffectsLocked(s *pstate, eff replica.Effects) {
	if eff.EpochStart != nil {
		if err := s.p.MakeLeader(eff.EpochStart.Epoch); err != nil && !errors.Is(err, partition.ErrDeleted) {
			m.log.Error("starting leader epoch", "topic", s.tp.Topic, "partition", s.tp.Partition, "err", err)
		}
	}
	if eff.HighWatermarkMoved {
		if s.st.Role() == replica.RoleLeader {
			s.p.AdvanceHighWatermark(s.st.HighWatermark())
		} else {
			s.p.SetHighWatermark(s.st.HighWatermark())
		}
		s.wakeLocked()
	}
	if eff.AlterPartition != nil {
		m.sendAlter(s, *eff.AlterPartition)
	}
}

// wakeLocked wakes the acks=all waiters of s. s.mu is held.
func (s *pstate) wakeLocked() {
	close(s.notify)
	s.notify = make(chan struct{})
}

// forgetLocked drops s: its fetcher stops fetching it and its waiters find
// it gone. m.mu is held.
func (m *Manager) forgetLocked(s *pstate) {
	m.removeFromFetcherLocked(s.tp)
	delete(m.states, s.tp)
	s.p.StopLeading()
	s.mu.Lock()
	s.gone = true
	s.wakeLocked()
	s.mu.Unlock()
}

func (m *Manager) state(tp log.TopicPartition) *pstate {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.states[tp]
}

// Replicated reports whether tp is a replicated partition of this node.
func (m *Manager) Replicated(tp log.TopicPartition) bool { return m.state(tp) != nil }

// FollowerFetch is one partition of a follower's Fetch at this leader, as
// Kafka's Partition.fetchRecords for a follower after the read: the
// follower's fetch offset is recorded, the ISR may expand and the high
// watermark advance. The Fetch handler checked the leader epoch and the
// divergence, and read at fetchOffset. It returns the high watermark after
// the fetch, or an error of broker/replica (NOT_LEADER_OR_FOLLOWER for a
// broker that is not a replica, OFFSET_OUT_OF_RANGE). A partition that is
// not replicated answers ok with -1.
func (m *Manager) FollowerFetch(tp log.TopicPartition, replicaID int32, brokerEpoch int64, fetchOffset, logStartOffset int64) (int64, error) {
	s := m.state(tp)
	if s == nil {
		return -1, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := m.now()
	s.refreshLocked(now)
	res := s.st.FollowerFetch(replica.FetchRequest{ReplicaID: replicaID, BrokerEpoch: brokerEpoch, CurrentLeaderEpoch: -1,
		FetchOffset: fetchOffset, LogStartOffset: logStartOffset, LastFetchedEpoch: replica.UndefinedEpoch}, nil, now)
	if res.Err != nil {
		return -1, res.Err
	}
	m.applyEffectsLocked(s, res.Effects)
	return s.p.HighWatermark(), nil
}

// refreshLocked tells the state machine the partition's log start and end,
// which appends (produce, coordinators) and retention move. s.mu is held.
func (s *pstate) refreshLocked(now time.Time) replica.Effects {
	s.st.LogStartMoved(s.p.LogStartOffset())
	return s.st.LocalAppend(s.p.LogEndOffset(), now)
}

// CheckAppend refuses an acks=all produce before its append when the ISR
// is under min.insync.replicas (replica.ErrNotEnoughReplicas), as Kafka's
// Partition.appendRecordsToLeader, and a produce to a replicated partition
// this node does not lead. A partition that is not replicated passes.
func (m *Manager) CheckAppend(tp log.TopicPartition, acks int16) error {
	s := m.state(tp)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.CheckAppend(acks)
}

// Appended records the leader's new log end after an append: with an ISR
// of the leader alone the high watermark moves at once.
func (m *Manager) Appended(tp log.TopicPartition) {
	s := m.state(tp)
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m.applyEffectsLocked(s, s.refreshLocked(m.now()))
}

// AwaitAcks waits until the high watermark of tp reaches requiredOffset,
// as Kafka's DelayedProduce for acks=all: nil then, or
// replica.ErrNotEnoughReplicasAfterAppend if the ISR shrank under
// min.insync.replicas meanwhile; replica.ErrNotLeaderOrFollower if this
// node stopped leading; ErrRequestTimedOut at deadline; ctx's error when
// the connection closed. A partition that is not replicated is done.
func (m *Manager) AwaitAcks(ctx context.Context, tp log.TopicPartition, requiredOffset int64, deadline time.Time) error {
	s := m.state(tp)
	if s == nil {
		return nil
	}
	var timer *time.Timer
	for {
		s.mu.Lock()
		if s.gone {
			s.mu.Unlock()
			return replica.ErrNotLeaderOrFollower
		}
		done, err := s.st.CheckAcks(requiredOffset)
		notify := s.notify
		s.mu.Unlock()
		if done || err != nil {
			return err
		}
		wait := deadline.Sub(m.now())
		if wait <= 0 {
			return ErrRequestTimedOut
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-notify:
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// expireISR is Kafka's isr-expiration task: every half
// replica.lag.time.max.ms each led partition shrinks its ISR of followers
// that have not caught up within the lag time.
func (m *Manager) expireISR() {
	every := max(m.cfg.LagTimeMax/2, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		m.mu.Lock()
		states := make([]*pstate, 0, len(m.states))
		for _, s := range m.states {
			states = append(states, s)
		}
		m.mu.Unlock()
		for _, s := range states {
			s.mu.Lock()
			if s.st.Role() == replica.RoleLeader && !s.gone {
				now := m.now()
				m.applyEffectsLocked(s, s.refreshLocked(now))
				m.applyEffectsLocked(s, s.st.Tick(now))
			}
			s.mu.Unlock()
		}
	}
}

// sendAlter sends an AlterPartition to the active controller in the
// background and applies its answer, as Kafka's AlterPartitionManager;
// a failure to reach the controller is retried after the fetch backoff
// (the state machine hands the same request back).
func (m *Manager) sendAlter(s *pstate, req replica.AlterPartition) {
	if m.ctx.Err() != nil {
		return
	}
	m.wg.Go(func() {
		for {
			res := m.alter(s, req)
			if res.Err != nil {
				m.log.Info("AlterPartition failed", "topic", s.tp.Topic, "partition", s.tp.Partition, "err", res.Err)
			} else {
				m.log.Info("ISR changed", "topic", s.tp.Topic, "partition", s.tp.Partition,
					"isr", res.ISR, "partition_epoch", res.PartitionEpoch, "leader_recovery_state", res.LeaderRecovery.String())
			}
			s.mu.Lock()
			if s.gone {
				s.mu.Unlock()
				return
			}
			eff := s.st.AlterPartitionResult(res, m.now())
			if retry := eff.AlterPartition; retry != nil {
				s.mu.Unlock()
				select {
				case <-m.ctx.Done():
					return
				case <-time.After(max(m.cfg.FetchBackoff, 100*time.Millisecond)):
				}
				req = *retry
				continue
			}
			m.applyEffectsLocked(s, eff)
			s.wakeLocked()
			s.mu.Unlock()
			return
		}
	})
}

// alter is one AlterPartition round trip (v3, with broker epochs).
func (m *Manager) alter(s *pstate, req replica.AlterPartition) replica.AlterResult {
	out := replica.AlterResult{Seq: req.Seq}
	r := kmsg.NewPtrAlterPartitionRequest()
	r.SetVersion(3)
	r.BrokerID, r.BrokerEpoch = m.cfg.NodeID, m.ctl.BrokerEpoch()
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = s.topicID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = s.tp.Partition, req.LeaderEpoch, req.PartitionEpoch
	rp.LeaderRecoveryState = int8(req.LeaderRecovery)
	for _, b := range req.NewISR {
		e := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		e.BrokerID, e.BrokerEpoch = b.BrokerID, b.BrokerEpoch
		rp.NewEpochISR = append(rp.NewEpochISR, e)
	}
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	ctx, cancel := context.WithTimeout(m.ctx, 30*time.Second)
	defer cancel()
	resp, err := m.ctl.AlterPartition(ctx, r)
	switch {
	case err != nil:
		out.Err = err
		return out
	case resp.ErrorCode != 0:
		out.Err = fmt.Errorf("replication: AlterPartition: top-level error code %d", resp.ErrorCode)
		return out
	case len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1:
		out.Err = errors.New("replication: AlterPartition answer without the partition")
		return out
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		out.Err = alterError(p.ErrorCode)
		return out
	}
	if r := replica.LeaderRecoveryState(p.LeaderRecoveryState); r != replica.Recovered && r != replica.Recovering {
		// As DefaultAlterPartitionManager: UNKNOWN_SERVER_ERROR, retried.
		out.Err = fmt.Errorf("replication: AlterPartition answer with leader recovery state %d", p.LeaderRecoveryState)
		return out
	}
	out.LeaderEpoch, out.PartitionEpoch, out.ISR = p.LeaderEpoch, p.PartitionEpoch, p.ISR
	out.LeaderRecovery = replica.LeaderRecoveryState(p.LeaderRecoveryState)
	return out
}

// alterErrors are the AlterPartition partition errors the state machine
// tells apart, by Kafka error code.
var alterErrors = map[int16]error{
	kerr.FencedLeaderEpoch.Code:       replica.ErrFencedLeaderEpoch,
	kerr.InvalidUpdateVersion.Code:    replica.ErrInvalidUpdateVersion,
	kerr.IneligibleReplica.Code:       replica.ErrIneligibleReplica,
	kerr.UnknownTopicOrPartition.Code: replica.ErrUnknownTopicOrPartition,
	kerr.UnknownTopicID.Code:          replica.ErrUnknownTopicID,
	kerr.InvalidRequest.Code:          replica.ErrInvalidRequest,
	kerr.NewLeaderElected.Code:        replica.ErrNewLeaderElected,
	kerr.NotLeaderForPartition.Code:   replica.ErrNotLeaderOrFollower,
	kerr.UnknownLeaderEpoch.Code:      replica.ErrUnknownLeaderEpoch,
	kerr.OperationNotAttempted.Code:   replica.ErrOperationNotAttempted,
}

func alterError(code int16) error {
	if err, ok := alterErrors[code]; ok {
		return err
	}
	return fmt.Errorf("replication: AlterPartition: error code %d", code)
}

// fetcherKey names one fetcher: the leader it fetches from and its index
// among num.replica.fetchers.
type fetcherKey struct {
	leader int32
	index  int
}

func (m *Manager) fetcherIndex(tp log.TopicPartition) int {
	h := fnv.New32a()
	h.Write([]byte(tp.Topic))
	return int((h.Sum32() + uint32(tp.Partition)) % uint32(m.cfg.NumFetchers))
}

// addToFetcherLocked hands s to the fetcher of leader. m.mu is held.
func (m *Manager) addToFetcherLocked(s *pstate, leader, epoch int32) {
	k := fetcherKey{leader: leader, index: m.fetcherIndex(s.tp)}
	f := m.fetchers[k]
	if f == nil {
		f = newFetcher(m, leader)
		m.fetchers[k] = f
		m.wg.Go(f.run)
	}
	f.add(s, epoch)
}

// removeFromFetcherLocked stops fetching tp. m.mu is held.
func (m *Manager) removeFromFetcherLocked(tp log.TopicPartition) {
	for k, f := range m.fetchers {
		if f.remove(tp) == 0 {
			f.stop()
			delete(m.fetchers, k)
		}
	}
}

// leaderAddr is the inter-broker endpoint of broker id in the latest image.
func (m *Manager) leaderAddr(id int32) (string, bool) {
	m.mu.Lock()
	img := m.img
	m.mu.Unlock()
	if img == nil {
		return "", false
	}
	b, ok := img.Broker(id)
	if !ok {
		return "", false
	}
	for _, e := range b.Endpoints {
		if e.Name == m.cfg.Listener {
			return e.Host + ":" + strconv.Itoa(int(e.Port)), true
		}
	}
	return "", false
}
