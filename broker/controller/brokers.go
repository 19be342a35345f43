package controller

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cascade-kafka/cascade/broker/metadata"
)

// RegisterBrokerRequest is BrokerRegistrationRequest v4's content.
type RegisterBrokerRequest struct {
	BrokerID      int32
	ClusterID     string
	IncarnationID metadata.UUID
	Listeners     []metadata.Endpoint
	Features      []metadata.BrokerFeature
	Rack          string // "" for none
	// PreviousBrokerEpoch is the epoch the broker held when it last shut
	// down cleanly (BrokerRegistrationRequest v3's, KIP-966), -1 when it
	// did not. A new incarnation that names any other epoch than the
	// registered one is taken to have shut down uncleanly, as Kafka's
	// ClusterControlManager takes a broker without a clean-shutdown file.
	PreviousBrokerEpoch int64
}

// RegisterBrokerReply is BrokerRegistrationResponse's content.
type RegisterBrokerReply struct {
	BrokerEpoch int64
}

// minKRaftMetadataVersion is the metadata.version a broker that names no
// range is taken to support, as Kafka's MetadataVersion.MINIMUM_KRAFT_VERSION.
const minKRaftMetadataVersion int16 = 1

// RegisterBroker registers a broker incarnation, as Kafka's
// ClusterControlManager.registerBroker. nextOffset is the metadata log
// offset the proposed batch will have (the image's Offset once applied);
// a new incarnation's broker epoch is that offset, as Kafka makes it the
// offset of the RegisterBrokerRecord, so epochs only grow. The same
// incarnation registering again keeps its epoch and state. A different
// incarnation is refused with DUPLICATE_BROKER_REGISTRATION while the old
// one's session is valid; once it has lapsed (or BrokerGone was reported),
// the old incarnation is fenced in the same batch (leaders moved, ISRs
// shrunk) before the new one is registered, fenced, to be unfenced by
// heartbeats once it has caught up.
func (c *Controller) RegisterBroker(img *metadata.Image, now time.Time, nextOffset int64, req RegisterBrokerRequest) ([]metadata.Record, RegisterBrokerReply, error) {
	if nextOffset <= img.Offset {
		return nil, RegisterBrokerReply{}, fmt.Errorf("controller: next offset %d is not after the image's %d", nextOffset, img.Offset)
	}
	if req.ClusterID != img.ClusterID {
		return nil, RegisterBrokerReply{}, newErr(ErrInconsistentClusterID, "Expected cluster ID %s, but got cluster ID %s", img.ClusterID, req.ClusterID)
	}
	if req.BrokerID < 0 {
		return nil, RegisterBrokerReply{}, newErr(ErrInvalidRegistration, "Invalid broker id %d", req.BrokerID)
	}
	existing, found := img.Broker(req.BrokerID)
	sameIncarnation := found && existing.IncarnationID == req.IncarnationID
	if found && !sameIncarnation && c.validSession(existing, now) {
		return nil, RegisterBrokerReply{}, newErr(ErrDuplicateBrokerRegistration, "Another broker is registered with that broker id.")
	}
	names := map[string]bool{}
	for _, l := range req.Listeners {
		if names[l.Name] {
			return nil, RegisterBrokerReply{}, newErr(ErrInvalidRegistration, "Duplicate listener name %s", l.Name)
		}
		names[l.Name] = true
	}
	features, err := checkFeatures(img, req)
	if err != nil {
		return nil, RegisterBrokerReply{}, err
	}
	rec := metadata.RegisterBrokerRecord{BrokerID: req.BrokerID, IncarnationID: req.IncarnationID,
		Endpoints: slices.Clone(req.Listeners), Features: features, Rack: req.Rack}
	b := &batch{img: img}
	if sameIncarnation {
		rec.BrokerEpoch, rec.Fenced, rec.InControlledShutdown = existing.Epoch, existing.Fenced, existing.InControlledShutdown
	} else {
		if found {
			// Cascade's addition: Kafka leaves a lapsed old incarnation
			// leading until the next fencing check; here it is fenced
			// before it is replaced.
			if err := c.fence(b, req.BrokerID); err != nil {
				return nil, RegisterBrokerReply{}, err
			}
		}
		if c.cfg.EligibleLeaderReplicas && (!found || req.PreviousBrokerEpoch != existing.Epoch) {
			// As ReplicationControlManager.handleBrokerUncleanShutdown:
			// a log that may have lost acknowledged records is no
			// eligible leader; it leaves every ISR and ELR.
			if err := c.removeReplica(b, req.BrokerID, inISROrELR(req.BrokerID), []int32{req.BrokerID}); err != nil {
				return nil, RegisterBrokerReply{}, err
			}
		}
		rec.BrokerEpoch, rec.Fenced = nextOffset, true
	}
	if err := b.add(rec); err != nil {
		return nil, RegisterBrokerReply{}, err
	}
	reg, _ := b.img.Broker(req.BrokerID)
	s := c.session(reg, now)
	s.lastContact, s.registerOffset = now, nextOffset
	return b.recs, RegisterBrokerReply{BrokerEpoch: rec.BrokerEpoch}, nil
}

// checkFeatures checks that the broker supports every finalized feature
// level, as ClusterControlManager.processRegistrationFeature, and returns
// the features to record.
func checkFeatures(img *metadata.Image, req RegisterBrokerRequest) ([]metadata.BrokerFeature, error) {
	finalized := img.Features()
	out := slices.Clone(req.Features)
	if !slices.ContainsFunc(out, func(f metadata.BrokerFeature) bool { return f.Name == "metadata.version" }) {
		out = append(out, metadata.BrokerFeature{Name: "metadata.version",
			MinSupportedVersion: minKRaftMetadataVersion, MaxSupportedVersion: minKRaftMetadataVersion})
	}
	for _, f := range out {
		level := finalized[f.Name] // 0 when not finalized
		if level < f.MinSupportedVersion || level > f.MaxSupportedVersion {
			return nil, newErr(ErrUnsupportedVersion, "Unable to register because the broker does not support finalized version %d of %s. The broker wants a version between %d and %d, inclusive.",
				level, f.Name, f.MinSupportedVersion, f.MaxSupportedVersion)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(finalized)) {
		if finalized[name] != 0 && !slices.ContainsFunc(out, func(f metadata.BrokerFeature) bool { return f.Name == name }) {
			return nil, newErr(ErrUnsupportedVersion, "Unable to register because the broker does not support finalized version %d of %s. The broker wants a version between 0 and 0, inclusive.",
				finalized[name], name)
		}
	}
	return out, nil
}

// validSession is BrokerHeartbeatManager.hasValidSession: unfenced and
// heard from within the session timeout.
func (c *Controller) validSession(b *metadata.BrokerRegistration, now time.Time) bool {
	if b.Fenced {
		return false
	}
	return !now.After(c.session(b, now).lastContact.Add(c.cfg.SessionTimeout))
}

// HeartbeatRequest is BrokerHeartbeatRequest's content.
type HeartbeatRequest struct {
	BrokerID              int32
	BrokerEpoch           int64
	CurrentMetadataOffset int64
	WantFence             bool
	WantShutDown          bool
}

// HeartbeatReply is BrokerHeartbeatResponse's content.
type HeartbeatReply struct {
	IsCaughtUp           bool
	IsFenced             bool
	InControlledShutdown bool
	ShouldShutDown       bool
}

// brokerState is Kafka's BrokerControlState.
type brokerState int

const (
	stateFenced brokerState = iota
	stateUnfenced
	stateControlledShutdown
	stateShutdownNow
)

// BrokerHeartbeat records a heartbeat and moves the broker between states
// as Kafka's BrokerHeartbeatManager.calculateNextBrokerState and
// ReplicationControlManager.processBrokerHeartbeat: a fenced broker is
// unfenced once its metadata offset reaches its registration's (and
// leaderless partitions it can lead get it as leader); an unfenced broker
// asking to shut down enters controlled shutdown (leaderships moved to
// other ISR members, itself removed from ISRs) and is told to shut down
// once it leads nothing and every active broker has caught up past that
// change. nextOffset is the offset the proposed batch will have. A wrong
// epoch is STALE_BROKER_EPOCH.
func (c *Controller) BrokerHeartbeat(img *metadata.Image, now time.Time, nextOffset int64, req HeartbeatRequest) ([]metadata.Record, HeartbeatReply, error) {
	reg, ok := img.Broker(req.BrokerID)
	if !ok {
		return nil, HeartbeatReply{}, newErr(ErrStaleBrokerEpoch, "No broker registration found for broker id %d", req.BrokerID)
	}
	if reg.Epoch != req.BrokerEpoch {
		return nil, HeartbeatReply{}, newErr(ErrStaleBrokerEpoch, "Expected broker epoch %d, but got broker epoch %d", reg.Epoch, req.BrokerEpoch)
	}
	s := c.session(reg, now)
	cur := stateUnfenced
	switch {
	case reg.Fenced:
		cur = stateFenced
	case reg.InControlledShutdown:
		cur = stateControlledShutdown
	}
	next := cur
	switch cur {
	case stateFenced:
		switch {
		case req.WantShutDown:
			next = stateShutdownNow
		case !req.WantFence && req.CurrentMetadataOffset >= s.registerOffset:
			next = stateUnfenced
		}
	case stateUnfenced:
		switch {
		case req.WantFence && req.WantShutDown:
			next = stateShutdownNow
		case req.WantFence:
			next = stateFenced
		case req.WantShutDown && leads(img, req.BrokerID):
			next = stateControlledShutdown
		case req.WantShutDown:
			next = stateShutdownNow
		}
	case stateControlledShutdown:
		if s.shutdownOffset < 0 {
			// Begun under an earlier controller: every active broker must
			// reach what this one has applied.
			s.shutdownOffset = img.Offset
		}
		if !leads(img, req.BrokerID) && s.shutdownOffset <= c.lowestActiveOffset(img, now) {
			next = stateShutdownNow
		}
	}
	b := &batch{img: img}
	if next != cur {
		var err error
		switch next {
		case stateFenced, stateShutdownNow:
			err = c.fence(b, req.BrokerID)
		case stateUnfenced:
			if err = b.add(metadata.BrokerRegistrationChangeRecord{BrokerID: reg.ID, BrokerEpoch: reg.Epoch, Fenced: metadata.Unfence}); err == nil {
				err = c.electLeaderless(b)
			}
		case stateControlledShutdown:
			if err = b.add(metadata.BrokerRegistrationChangeRecord{BrokerID: reg.ID, BrokerEpoch: reg.Epoch, InControlledShutdown: 1}); err == nil {
				err = c.moveAway(b, req.BrokerID)
			}
			if s.shutdownOffset < 0 {
				s.shutdownOffset = nextOffset
			}
		}
		if err != nil {
			return nil, HeartbeatReply{}, err
		}
	}
	s.lastContact, s.metadataOffset = now, req.CurrentMetadataOffset
	return b.recs, HeartbeatReply{
		IsCaughtUp:           req.CurrentMetadataOffset >= s.registerOffset,
		IsFenced:             next == stateFenced || next == stateShutdownNow,
		InControlledShutdown: next == stateControlledShutdown,
		ShouldShutDown:       next == stateShutdownNow,
	}, nil
}

// lowestActiveOffset is the least metadata offset of the active brokers
// (unfenced, not shutting down), or the largest offset when there are none,
// as BrokerHeartbeatManager.lowestActiveOffset.
func (c *Controller) lowestActiveOffset(img *metadata.Image, now time.Time) int64 {
	low := int64(1<<63 - 1)
	for _, b := range img.Brokers() {
		if b.Active() {
			low = min(low, c.session(b, now).metadataOffset)
		}
	}
	return low
}

// BrokerGone fences broker id at once: the caller knows its process is gone
// (its connections were reset or refused), so waiting out the session
// timeout would only keep its partitions leaderless. epoch is the broker
// epoch the caller knew the process by, or -1 when it did not know it; a
// different epoch means a newer incarnation has registered since, and
// nothing is fenced (STALE_BROKER_EPOCH). A broker already fenced changes
// nothing. If the process was not gone after all, its next heartbeat
// unfences it once it has caught up, as after a session timeout.
func (c *Controller) BrokerGone(img *metadata.Image, id int32, epoch int64) ([]metadata.Record, error) {
	reg, ok := img.Broker(id)
	if !ok {
		return nil, newErr(ErrBrokerIDNotRegistered, "Broker ID %d is not currently registered", id)
	}
	if epoch >= 0 && epoch != reg.Epoch {
		return nil, newErr(ErrStaleBrokerEpoch, "Expected broker epoch %d, but got broker epoch %d", reg.Epoch, epoch)
	}
	b := &batch{img: img}
	if err := c.fence(b, id); err != nil {
		return nil, err
	}
	return b.recs, nil
}

// UnregisterBroker removes a broker's registration after taking it out of
// every ISR, ELR and leadership, as ReplicationControlManager.unregisterBroker
// (UnregisterBroker API, KIP-858): a broker that is gone for good is no
// eligible leader.
func (c *Controller) UnregisterBroker(img *metadata.Image, id int32) ([]metadata.Record, error) {
	reg, ok := img.Broker(id)
	if !ok {
		return nil, newErr(ErrBrokerIDNotRegistered, "Broker ID %d is not currently registered", id)
	}
	b := &batch{img: img}
	if err := c.removeReplica(b, id, inISROrELR(id), []int32{id}); err != nil {
		return nil, err
	}
	if err := b.add(metadata.UnregisterBrokerRecord{BrokerID: id, BrokerEpoch: reg.Epoch}); err != nil {
		return nil, err
	}
	delete(c.sessions, id)
	return b.recs, nil
}

// TickReply says what a Tick did.
type TickReply struct {
	// Fenced are the brokers fenced for a lapsed session, oldest first.
	Fenced []int32
	// Elections counts the partitions given a new leader by rebalancing
	// or unclean recovery.
	Elections int
}

// Tick runs the controller's timed work at now: it fences every broker
// whose last heartbeat is older than the session timeout, oldest first
// (Kafka's maybeFenceOneStaleBroker, run until none is stale), each fence
// planned against the ones before it; every
// unclean.leader.election.interval.ms it elects leaders uncleanly for
// leaderless partitions of topics that allow it (maybeElectUncleanLeaders);
// and every leader.imbalance.check.interval.seconds with
// auto.leader.rebalance.enable it moves leadership back to preferred
// replicas that are in the ISR and active (maybeBalancePartitionLeaders).
// Each of those elects at most 1000 leaders per run; the rest wait for the
// next.
func (c *Controller) Tick(img *metadata.Image, now time.Time) ([]metadata.Record, TickReply, error) {
	c.forget(img)
	var reply TickReply
	type stale struct {
		id   int32
		last time.Time
	}
	var lapsed []stale
	for _, reg := range img.Brokers() {
		if s := c.session(reg, now); !reg.Fenced && now.After(s.lastContact.Add(c.cfg.SessionTimeout)) {
			lapsed = append(lapsed, stale{reg.ID, s.lastContact})
		}
	}
	slices.SortStableFunc(lapsed, func(a, b stale) int { return a.last.Compare(b.last) })
	b := &batch{img: img}
	for _, s := range lapsed {
		if err := c.fence(b, s.id); err != nil {
			return nil, TickReply{}, err
		}
		reply.Fenced = append(reply.Fenced, s.id)
	}
	if c.unclean.due(now, c.cfg.UncleanLeaderElectionInterval) {
		n, err := c.electUnclean(b)
		if err != nil {
			return nil, TickReply{}, err
		}
		reply.Elections += n
	}
	if c.cfg.AutoLeaderRebalance && c.rebalance.due(now, c.cfg.LeaderImbalanceCheckInterval) {
		n, err := c.balance(b, maxElectionsPerTick)
		if err != nil {
			return nil, TickReply{}, err
		}
		reply.Elections += n
	}
	return b.recs, reply, nil
}
