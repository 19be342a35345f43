// Package quorum owns the Raft layer of the metadata quorum: a
// go.etcd.io/raft/v3 RawNode over a durable log of its own, the transport
// between the controller quorum's voters, and the loop that joins them. It
// carries opaque entries (encoded metadata record batches) and knows
// nothing of what they mean.
//
// Layers, innermost first:
//
//   - Storage: the directory <log.dirs[0]>/__cluster_metadata-0/raft with
//     an append-only log file (length + CRC-32C framed entry and hard
//     state records; torn tail truncated on open; an entry that does not
//     follow the last one replaces the suffix from its index, which is how
//     raft overwriting an uncommitted suffix becomes durable) and a
//     snapshot file written by rename. After a snapshot the log is
//     rewritten from the snapshot's index on, keeping RetainEntries before
//     it. Raft reads through an in-memory raft.MemoryStorage, as etcd's
//     raftexample.
//   - Core: no goroutines, clock, disk policy or network of its own. The
//     caller ticks it, steps it with messages, proposes, then runs Ready
//     (persist with fsync, then release messages and committed entries),
//     sends the messages, and calls Advance (apply to the Application,
//     snapshot every SnapshotEntries). The simulation tests drive it.
//   - Node: the I/O shell. Open(cfg, app, transport) starts one run loop
//     goroutine; Propose(ctx, data) returns the index once the entry is
//     committed and applied locally, or a *NotLeaderError (errors.Is
//     ErrNotLeader, naming the leader known), ErrLeadershipLost (outcome
//     unknown, as Kafka's NOT_CONTROLLER after a failover), ErrBusy,
//     ErrEntryTooLarge, ErrEmptyEntry, ctx.Err() or ErrStopped; Leader()
//     and LeaderChanged() follow elections; Close stops it. The
//     Application's Restore, Apply and Snapshot run on the loop goroutine.
//   - Describe and TransferLeadership (describe.go) run on the loop: the
//     leader's view of the quorum for DescribeQuorum (commit index, each
//     voter's match, Kafka's last-fetch and caught-up times from the
//     answers the leader steps), and a clean hand-over of the leadership
//     to the most caught-up live voter before a leader stops.
//   - TCPTransport: one persistent outbound connection per peer with a
//     bounded, dropping queue; inbound frames are Kafka-style requests
//     with the private api key APIKey, so the controller listener can
//     route them by api key (FrameAPIKey, HandleFrame).
//   - Observers: a node that is not a voter (process.roles=broker)
//     follows the committed log as a Kafka observer does. Observer fetches
//     go to a voter's controller listener with the private api key
//     ObserverFetchAPIKey (observer_frame.go has the format); the voter
//     (Node.ServeObserverFetch) answers only committed entries, from the
//     next index asked for up to a byte bound, or its latest snapshot when
//     that index is below its log start, and holds the fetch up to its
//     wait while nothing new commits. Every answer names the leader and
//     term the voter knows, which is how an Observer finds the leader it
//     prefers to fetch from. Node.Observers lists who fetched.
//
// The voter set is static, from controller.quorum.voters; PreVote and
// CheckQuorum are on. TimingFromKafka maps Kafka's quorum timeouts to
// ticks.
//
// Tests: the simulation (sim_test.go, sim_scenario_test.go) runs seeded
// clusters of Cores with real files and a power-loss crash model; a
// failing seed prints the -quorum.seed flag that replays it alone, and
// -quorum.seeds sets how many run. The scripts under testdata/ are
// datadriven interaction tests (regenerate with -rewrite). node_test.go
// runs three Nodes over TCP on 127.0.0.1 and reports the failover time.
//
// Use:
//
//	tr, _ := quorum.NewTCPTransport(quorum.TransportConfig{NodeID: 1, Voters: voters, ClusterID: id})
//	go tr.Serve(ln) // or route frames with api key quorum.APIKey to tr.HandleFrame
//	n, _ := quorum.Open(quorum.Config{NodeID: 1, Voters: voters, Dir: dir, ClusterID: id}, app, tr)
//	idx, err := n.Propose(ctx, batch) // err: *quorum.NotLeaderError, ErrLeadershipLost, ctx.Err()
//	leader, term := n.Leader()
//	<-n.LeaderChanged()
//	n.Close(); tr.Close()
//
//	o, _ := quorum.StartObserver(quorum.ObserverConfig{NodeID: 4, Voters: voters, ClusterID: id}, app)
//	<-o.CaughtUp()
//	leader, term = o.Leader()
//	o.Close()
package quorum
