package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/faults/netns"
	"github.com/cascade-kafka/cascade/matrix/apachekafka"
	"github.com/cascade-kafka/cascade/matrix/cascadecluster"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// ClusterTarget is a cluster the cluster suites run against: every node a
// process in a namespace of its own on Net, so that it can be killed,
// stopped, paused and restarted as a process and cut from its peers as a
// host, and the roles a fault aims at are found as a client finds them
// (Metadata, DescribeQuorum, FindCoordinator).
type ClusterTarget struct {
	Name string
	C    cluster.Cluster
	Net  *netns.Network
	// LogPaths and DataDirs are each node's log file and log dir, by node
	// id - 1.
	LogPaths, DataDirs []string
}

// clusterSettings are what both targets of a cluster suite run with,
// overrides applied last: per-message fsync, so that nothing acknowledged
// may be lost to a SIGKILL; a short broker session, so that a restarted
// node registers again soon (the controller refuses a new incarnation
// until the killed one's session has expired) and a paused node is fenced
// within a pause; min.insync.replicas=2 for the suite's RF=3 topic; and
// the coordinator's prompt aborts of timed-out transactions.
func clusterSettings(overrides map[string]string) map[string]string {
	s := map[string]string{
		"log.flush.interval.messages":  "1",
		"broker.session.timeout.ms":    "3000",
		"broker.heartbeat.interval.ms": "500",
		"min.insync.replicas":          "2",
		"replica.lag.time.max.ms":      fmt.Sprint(replicaLagTimeMax.Milliseconds()),
		txnAbortIntervalKey:            txnAbortInterval,
	}
	for k, v := range overrides {
		s[k] = v
	}
	return s
}

// StartKafkaCluster starts a three-node Apache Kafka KRaft cluster of
// combined nodes on nw, with directories under dir.
func StartKafkaCluster(ctx context.Context, nw *netns.Network, dir string, overrides map[string]string) (*ClusterTarget, error) {
	c, err := apachekafka.StartCluster(ctx, apachekafka.ClusterOptions{Nodes: nw.Nodes(), Dir: dir,
		Overrides: clusterSettings(overrides), Placement: nw})
	if err != nil {
		return nil, err
	}
	t := &ClusterTarget{Name: c.Name(), C: c, Net: nw}
	for _, n := range c.Nodes() {
		t.node(n.LogPath(), n.DataDir())
	}
	return t, nil
}

// StartCascadeCluster starts a three-node Cascade cluster of combined
// nodes on nw, with directories under dir.
func StartCascadeCluster(ctx context.Context, nw *netns.Network, dir string, overrides map[string]string) (*ClusterTarget, error) {
	c, err := cascadecluster.Start(ctx, cascadecluster.Options{Nodes: nw.Nodes(), Dir: dir,
		Overrides: clusterSettings(overrides), Placement: nw})
	if err != nil {
		return nil, err
	}
	t := &ClusterTarget{Name: c.Name(), C: c, Net: nw}
	for _, n := range c.Nodes() {
		t.node(n.LogPath(), filepath.Join(n.Dir, "data"))
	}
	return t, nil
}

// node records the next node's log file and log dir.
func (t *ClusterTarget) node(logPath, dataDir string) {
	t.LogPaths = append(t.LogPaths, logPath)
	t.DataDirs = append(t.DataDirs, dataDir)
}

// Role is what a cluster fault aims at, found again each time the fault
// is applied: whoever holds the role then.
type Role string

// The roles of the cluster suites.
const (
	RoleLeader           Role = "leader"
	RoleFollower         Role = "follower"
	RoleController       Role = "controller"
	RoleGroupCoordinator Role = "group-coordinator"
	RoleTxnCoordinator   Role = "txn-coordinator"
)

// Roles lists every role, in the order reports show them.
var Roles = []Role{RoleLeader, RoleFollower, RoleController, RoleGroupCoordinator, RoleTxnCoordinator}

// Watch names what the roles refer to: the partition whose leader and
// follower are meant, the group and the transactional id whose
// coordinators are.
type Watch struct {
	Topic     string
	Partition int32
	Group     string
	TxnID     string
}

// askTimeout bounds one question to one node while finding a role.
const askTimeout = 2 * time.Second

// Holder returns the node that holds role now, asking the live nodes in
// turn.
func (t *ClusterTarget) Holder(ctx context.Context, role Role, w Watch) (int, error) {
	switch role {
	case RoleController:
		qctx, cancel := context.WithTimeout(ctx, 3*askTimeout)
		defer cancel()
		id, _, err := cluster.QuorumLeader(qctx, t.C)
		return id, err
	case RoleGroupCoordinator:
		return t.coordinator(ctx, 0, w.Group)
	case RoleTxnCoordinator:
		return t.coordinator(ctx, 1, w.TxnID)
	case RoleLeader, RoleFollower:
		leader, replicas, err := t.replicas(ctx, w.Topic, w.Partition)
		if err != nil {
			return -1, err
		}
		if role == RoleLeader {
			return leader, nil
		}
		for _, r := range replicas {
			if r != leader && t.C.Live(r) {
				return r, nil
			}
		}
		return -1, fmt.Errorf("%s-%d has no live follower (replicas %v, leader %d)", w.Topic, w.Partition, replicas, leader)
	}
	return -1, fmt.Errorf("faults: unknown role %q", role)
}

// replicas returns a partition's leader and replicas as a live node's
// Metadata shows them.
func (t *ClusterTarget) replicas(ctx context.Context, topic string, p int32) (int, []int, error) {
	var errs []error
	for _, id := range cluster.LiveBrokers(t.C) {
		actx, cancel := context.WithTimeout(ctx, askTimeout)
		resp, err := t.C.Request(actx, id, cluster.MetadataRequest([]string{topic}))
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", id, err))
			continue
		}
		for _, mt := range resp.(*kmsg.MetadataResponse).Topics {
			for _, mp := range mt.Partitions {
				if mp.Partition != p {
					continue
				}
				if mp.ErrorCode != 0 || mp.Leader < 0 || !t.C.Live(int(mp.Leader)) {
					errs = append(errs, fmt.Errorf("node %d: %s-%d leader %d, error %d", id, topic, p, mp.Leader, mp.ErrorCode))
					continue
				}
				var rs []int
				for _, r := range mp.Replicas {
					rs = append(rs, int(r))
				}
				return int(mp.Leader), rs, nil
			}
		}
	}
	return -1, nil, fmt.Errorf("no live leader of %s-%d: %w", topic, p, errors.Join(errs...))
}

// coordinator returns the node a live node names as the coordinator of
// key (kind 0: a group, 1: a transactional id).
func (t *ClusterTarget) coordinator(ctx context.Context, kind int8, key string) (int, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKeys = kind, []string{key}
	var errs []error
	for _, id := range cluster.LiveBrokers(t.C) {
		actx, cancel := context.WithTimeout(ctx, askTimeout)
		resp, err := t.C.Request(actx, id, req)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", id, err))
			continue
		}
		for _, c := range resp.(*kmsg.FindCoordinatorResponse).Coordinators {
			if err := kerr.ErrorForCode(c.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("node %d: %w", id, err))
				continue
			}
			if t.C.Live(int(c.NodeID)) {
				return int(c.NodeID), nil
			}
			errs = append(errs, fmt.Errorf("node %d names %d, which is down", id, c.NodeID))
		}
	}
	return -1, fmt.Errorf("no live coordinator of %q: %w", key, errors.Join(errs...))
}

// holderWithin asks for role's holder until one is found or bound passes:
// right after an earlier fault the role may be between holders.
func (t *ClusterTarget) holderWithin(ctx context.Context, role Role, w Watch, bound time.Duration) (int, error) {
	hctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var id int
	err := cluster.Poll(hctx, 200*time.Millisecond, func() error {
		var err error
		id, err = t.Holder(hctx, role, w)
		return err
	})
	return id, err
}

// holderBound is how long a fault waits for its role to have a holder.
const holderBound = 60 * time.Second

// restartBound bounds a node's restart, which outlives the run's end (a
// node left down could not be drained).
const restartBound = 3 * time.Minute

// restart starts node id again, whatever ctx says.
func (t *ClusterTarget) restart(ctx context.Context, id int) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restartBound)
	defer cancel()
	return t.C.Restart(rctx, id)
}

// ClusterFaults returns the cluster suite's faults on t: Kafka's own
// replication test's failure modes (clean and hard shutdown, clean and
// hard bounce, pause) for every role, a hard bounce of every node at
// once, and network partitions made on t.Net: a partition leader, the
// active controller and a follower each isolated from the other nodes
// (clients still reach it), and the clients cut from the partition
// leader. seed draws the pauses' lengths.
func ClusterFaults(t *ClusterTarget, w Watch, seed uint64) []Fault {
	var out []Fault
	rng := rand.New(rand.NewPCG(seed, 0xc1a5))
	var rmu sync.Mutex
	for _, role := range Roles {
		out = append(out,
			t.downFault("hard-shutdown", role, w, t.C.Kill),
			t.downFault("clean-shutdown", role, w, t.C.Stop),
			t.bounceFault("hard-bounce", role, w, t.C.Kill),
			t.bounceFault("clean-bounce", role, w, t.C.Stop),
			t.pauseFault(role, w, func() time.Duration {
				rmu.Lock()
				defer rmu.Unlock()
				return clusterPauseMin + time.Duration(rng.Int64N(int64(clusterPauseMax-clusterPauseMin)+1))
			}))
	}
	out = append(out, t.bounceAllFault())
	for _, role := range []Role{RoleLeader, RoleController} {
		out = append(out, t.isolateFault(role, w))
	}
	out = append(out, t.isolateFollowerFault(w))
	out = append(out, t.clientsCutFault(w))
	// Delays and bandwidth limits between every pair of nodes (cluster_shaping.go).
	out = append(out, t.shapingFaults(seed)...)
	return out
}

// downFault takes role's holder down with stop (SIGKILL or SIGTERM)
// until the heal restarts it.
func (t *ClusterTarget) downFault(mode string, role Role, w Watch, stop func(int) error) Fault {
	var down int
	var note string
	return Fault{
		Name: mode + ":" + string(role),
		Apply: func(ctx context.Context) error {
			id, err := t.holderWithin(ctx, role, w, holderBound)
			if err != nil {
				return err
			}
			down, note = id, fmt.Sprintf("node %d", id)
			return stop(id)
		},
		Heal: func(ctx context.Context) error { return t.restart(ctx, down) },
		Note: func() string { return note },
	}
}

// bounceRounds is how many times a bounce chases its role: the node
// holding it is stopped and restarted, then whichever node holds it
// after that.
const bounceRounds = 2

// bounceFault stops role's holder with stop and restarts it, then does
// the same to the new holder.
func (t *ClusterTarget) bounceFault(mode string, role Role, w Watch, stop func(int) error) Fault {
	var nodes []int
	return Fault{
		Name: mode + ":" + string(role),
		Apply: func(ctx context.Context) error {
			nodes = nodes[:0]
			for range bounceRounds {
				id, err := t.holderWithin(ctx, role, w, holderBound)
				if err != nil {
					return err
				}
				nodes = append(nodes, id)
				if err := stop(id); err != nil {
					return err
				}
				if err := t.restart(ctx, id); err != nil {
					return err
				}
			}
			return nil
		},
		Heal:          func(context.Context) error { return nil },
		HealedOnApply: true,
		Note:          func() string { return fmt.Sprintf("nodes %v", nodes) },
	}
}

// Cluster pauses last longer than the broker session
// (clusterSettings), so the paused node is fenced and its partitions
// move, then it comes back.
const (
	clusterPauseMin = 4 * time.Second
	clusterPauseMax = 7 * time.Second
)

// pauseFault stops role's holder with SIGSTOP for a drawn length and
// continues it, inside Apply as PauseFault does.
func (t *ClusterTarget) pauseFault(role Role, w Watch, length func() time.Duration) Fault {
	var note string
	return Fault{
		Name: "pause:" + string(role),
		Apply: func(ctx context.Context) error {
			id, err := t.holderWithin(ctx, role, w, holderBound)
			if err != nil {
				return err
			}
			d := length()
			note = fmt.Sprintf("node %d for %v", id, d)
			if err := t.C.Pause(id); err != nil {
				return err
			}
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
			return t.C.Resume(id)
		},
		Heal:          func(context.Context) error { return nil },
		HealedOnApply: true,
		Note:          func() string { return note },
	}
}

// bounceAllFault kills every node at once and restarts them together
// (the quorum forms only when a majority runs), as Kafka's
// hard_bounce of the whole cluster with per-message fsync.
func (t *ClusterTarget) bounceAllFault() Fault {
	return Fault{
		Name: "hard-bounce:all",
		Apply: func(ctx context.Context) error {
			ids := cluster.LiveBrokers(t.C)
			for _, id := range ids {
				if err := t.C.Kill(id); err != nil {
					return err
				}
			}
			errs := make([]error, len(ids))
			var wg sync.WaitGroup
			for i, id := range ids {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = t.restart(ctx, id) }()
			}
			wg.Wait()
			return errors.Join(errs...)
		},
		Heal:          func(context.Context) error { return nil },
		HealedOnApply: true,
	}
}

// isolateFault cuts role's holder from every other node; clients still
// reach it. An isolated partition leader must not acknowledge an
// acks=all write it cannot replicate.
func (t *ClusterTarget) isolateFault(role Role, w Watch) Fault {
	return t.netFault("isolate:"+string(role), role, w, t.Net.Isolate)
}

// clientsCutFault cuts the clients' namespace from the partition leader:
// the leader keeps its role and its peers, and the clients cannot reach
// it until the heal.
func (t *ClusterTarget) clientsCutFault(w Watch) Fault {
	return t.netFault("clients-cut:"+string(RoleLeader), RoleLeader, w, func(id int) error { return t.Net.Cut(0, id) })
}

// netFault applies cut to role's holder; the heal removes every cut.
func (t *ClusterTarget) netFault(name string, role Role, w Watch, cut func(int) error) Fault {
	var note string
	return Fault{
		Name: name,
		Apply: func(ctx context.Context) error {
			id, err := t.holderWithin(ctx, role, w, holderBound)
			if err != nil {
				return err
			}
			note = fmt.Sprintf("node %d", id)
			return cut(id)
		},
		Heal: func(context.Context) error { return t.Net.Heal() },
		Note: func() string { return note },
	}
}

// processModes are the failure modes ClusterFaults applies to every role.
var processModes = []string{"hard-shutdown", "clean-shutdown", "hard-bounce", "clean-bounce", "pause"}

// CoverModesAndRoles keeps, of ClusterFaults' faults, each process
// failure mode for one role, the roles rotated by seed so that every mode
// and every role is applied at least once, and every other fault (the
// partitions and the bounce of every node): what one run in CI can pass
// through on one long-lived cluster.
func CoverModesAndRoles(faults []Fault, seed uint64) []Fault {
	keep := map[string]bool{}
	for i, mode := range processModes {
		keep[mode+":"+string(Roles[(i+int(seed%uint64(len(Roles))))%len(Roles)])] = true
	}
	var out []Fault
	for _, f := range faults {
		mode, role, _ := strings.Cut(f.Name, ":")
		if !slices.Contains(processModes, mode) || !slices.Contains(Roles, Role(role)) || keep[f.Name] {
			out = append(out, f)
		}
	}
	return out
}
