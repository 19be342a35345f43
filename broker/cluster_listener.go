package broker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/controller"
	"github.com/cascade-kafka/cascade/broker/handler"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/quorum"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// forwardedKeys are the admin requests a broker sends to the active
// controller as the client sent them, inside an Envelope with the client's
// principal (cluster_envelope.go), as Kafka's ForwardingManager does, and
// the controller listener answers with the same handler code as a single
// node. The controller listener also serves them sent directly, authorized
// as the connection's principal (KIP-919 clients, a broker's own requests).
var forwardedKeys = map[int16]bool{
	19: true, // CreateTopics
	20: true, // DeleteTopics
	30: true, // CreateAcls
	31: true, // DeleteAcls
	33: true, // AlterConfigs
	37: true, // CreatePartitions
	43: true, // ElectLeaders (servedByController)
	45: true, // AlterPartitionReassignments (servedByController)
	46: true, // ListPartitionReassignments (servedByController)
	44: true, // IncrementalAlterConfigs
	55: true, // DescribeQuorum (servedByController)
}

// controllerErrorCodes maps package controller's sentinels to Kafka codes.
var controllerErrorCodes = []struct {
	err  error
	code int16
}{
	{controller.ErrStaleBrokerEpoch, kerr.StaleBrokerEpoch.Code},
	{controller.ErrInconsistentClusterID, kerr.InconsistentClusterID.Code},
	{controller.ErrDuplicateBrokerRegistration, kerr.DuplicateBrokerRegistration.Code},
	{controller.ErrInvalidRegistration, kerr.InvalidRegistration.Code},
	{controller.ErrUnsupportedVersion, kerr.UnsupportedVersion.Code},
	{controller.ErrBrokerIDNotRegistered, kerr.BrokerIDNotRegistered.Code},
	{controller.ErrNotController, kerr.NotController.Code},
	{controller.ErrUnknownServerError, kerr.UnknownServerError.Code},
	// Partition-level results of ElectLeaders and AlterPartition.
	{controller.ErrElectionNotNeeded, kerr.ElectionNotNeeded.Code},
	{controller.ErrPreferredLeaderNotAvailable, kerr.PreferredLeaderNotAvailable.Code},
	{controller.ErrEligibleLeadersNotAvailable, kerr.EligibleLeadersNotAvailable.Code},
	{controller.ErrFencedLeaderEpoch, kerr.FencedLeaderEpoch.Code},
	{controller.ErrInvalidUpdateVersion, kerr.InvalidUpdateVersion.Code},
	{controller.ErrIneligibleReplica, kerr.IneligibleReplica.Code},
	{controller.ErrNewLeaderElected, kerr.NewLeaderElected.Code},
	{controller.ErrUnknownTopicID, kerr.UnknownTopicID.Code},
	{controller.ErrNoReassignmentInProgress, kerr.NoReassignmentInProgress.Code},
}

// codeOf returns the Kafka code of a controller operation's error: its
// sentinel's, else the handlers' mapping of metadata errors.
func codeOf(err error) int16 {
	for _, e := range controllerErrorCodes {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	return handler.ErrorCode(err)
}

// controllerCode returns the Kafka code and message of a controller
// operation's error.
func controllerCode(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	return codeOf(err), &msg
}

// serveController accepts connections on the controller listener.
func (n *clusterNode) serveController() {
	for {
		conn, err := n.ln.Accept()
		if err != nil {
			return
		}
		n.connsMu.Lock()
		if n.ctx.Err() != nil {
			n.connsMu.Unlock()
			conn.Close()
			return
		}
		n.conns[conn] = struct{}{}
		n.connsMu.Unlock()
		n.wg.Go(func() {
			defer func() {
				n.connsMu.Lock()
				delete(n.conns, conn)
				n.connsMu.Unlock()
				conn.Close()
			}()
			sc, r, id, err := wire.SecureConn(n.ctx, conn, &n.sec.Wire, controllerHandshakeTimeout)
			if err != nil {
				n.authRefused(conn.RemoteAddr(), err)
				return
			}
			n.serveControllerConn(sc, r, id)
		})
	}
}

// controllerHandshakeTimeout bounds the TLS handshake and SASL exchange
// of a controller listener connection.
const controllerHandshakeTimeout = 10 * time.Second

// authRefused logs a controller listener connection whose TLS handshake or
// SASL exchange failed: a node with the wrong certificate or password is a
// misconfiguration the operator must see, at most one warning per remote
// host and reason every frameWarnEvery.
func (n *clusterNode) authRefused(remote net.Addr, err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || n.ctx.Err() != nil {
		return
	}
	host, _, _ := net.SplitHostPort(remote.String())
	if errors.Is(err, wire.ErrAuthentication) && n.frameWarn.allow(host+err.Error(), time.Now()) {
		n.logger.Warn("controller listener refused a connection that failed to authenticate", "remote", remote, "err", err)
		return
	}
	n.logger.Debug("controller listener connection closed before it authenticated", "remote", remote, "err", err)
}

// serveControllerConn serves one authenticated connection of the
// controller listener, r holding what was read after authentication:
// quorum frames (api key quorum.APIKey) go to the raft transport, Kafka
// requests are answered in order. When a connection that carried a
// broker's heartbeats ends, the active controller probes that broker
// (probeGone).
func (n *clusterNode) serveControllerConn(conn net.Conn, r *bufio.Reader, id wire.Identity) {
	w := bufio.NewWriter(conn)
	broker, epoch := int32(-1), int64(-1)
	defer func() {
		if broker >= 0 && n.ctx.Err() == nil {
			n.wg.Go(func() { n.active.probeGone(broker, epoch) })
		}
	}()
	for {
		frame, err := quorum.ReadFrame(r, quorum.DefaultMaxFrameBytes)
		if err != nil {
			if !errors.Is(err, io.EOF) && n.ctx.Err() == nil {
				n.logger.Debug("controller connection closed", "remote", conn.RemoteAddr(), "err", err)
			}
			return
		}
		if key, _ := quorum.FrameAPIKey(frame); key == quorum.APIKey || key == quorum.ObserverFetchAPIKey {
			if !n.quorumAllowed(id) {
				return
			}
		}
		if key, _ := quorum.FrameAPIKey(frame); key == quorum.APIKey {
			if err := n.tr.HandleFrame(n.ctx, frame); err != nil {
				n.frameRefused("quorum frame", conn.RemoteAddr(), err)
				return
			}
			continue
		} else if key == quorum.ObserverFetchAPIKey {
			if err := n.answerObserver(w, frame); err != nil {
				n.frameRefused("observer fetch", conn.RemoteAddr(), err)
				return
			}
			continue
		}
		h, body, err := wire.ParseRequestHeader(frame)
		if err != nil {
			return
		}
		if (forwardedKeys[h.Key] || h.Key == envelopeKey) && senderGone(conn, r) {
			n.logger.Info("dropped a forwarded request whose sender gave up on it", "api", kmsg.NameForKey(h.Key), "remote", conn.RemoteAddr())
			return
		}
		resp, err := n.handleControllerRequest(&wire.Request{Header: h, Body: body, Remote: conn.RemoteAddr().String(),
			Principal: id.Principal, ClientHost: id.Host, Listener: id.Listener}, &broker, &epoch)
		if err != nil {
			n.logger.Debug("controller request refused", "key", h.Key, "version", h.Version, "err", err)
			return
		}
		out, at := wire.AppendFrameLength(nil)
		out = wire.AppendResponseHeader(out, h.CorrelationID, wire.ResponseHeaderFlexible(h.Key, h.Version))
		out = resp.AppendTo(out)
		wire.FinishFrame(out, at, 0)
		if _, err := w.Write(out); err != nil {
			return
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// quorumAllowed reports whether the connection's principal may send quorum
// frames: with an authorizer, CLUSTER_ACTION on the Cluster, as Kafka's
// ControllerApis requires of Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch
// and FetchSnapshot. Cascade's quorum frames are not Kafka requests and
// have no error answer, so a refused principal's connection is closed,
// with a warning.
func (n *clusterNode) quorumAllowed(id wire.Identity) bool {
	if n.authz == nil || n.authz.Authorize(acl.Session{Principal: id.Principal, Host: id.Host}, acl.ClusterAction, acl.Cluster, acl.ClusterName) {
		return true
	}
	if n.frameWarn.allow("quorum-denied "+id.Principal, time.Now()) {
		n.logger.Warn("refused quorum traffic from a principal without CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED)",
			"principal", id.Principal, "host", id.Host)
	}
	return false
}

// frameRefused logs a quorum or observer frame this listener refused. A
// frame of another cluster, or from a node that is not a voter here, is a
// misconfiguration the operator must see (the two nodes' cluster.id or
// controller.quorum.voters differ), so it is a warning, at most one per
// distinct message every frameWarnEvery since the sender keeps retrying;
// anything else is logged at debug level.
func (n *clusterNode) frameRefused(kind string, remote net.Addr, err error) {
	if errors.Is(err, quorum.ErrFrame) && n.frameWarn.allow(err.Error(), time.Now()) {
		n.logger.Warn(kind+" refused", "remote", remote, "err", err)
		return
	}
	n.logger.Debug(kind+" refused", "remote", remote, "err", err)
}

// frameWarnEvery is how often one refused-frame warning may repeat.
const frameWarnEvery = 30 * time.Second

// warnLimiter lets one message through per key every frameWarnEvery.
type warnLimiter struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (l *warnLimiter) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]time.Time{}
	}
	if t, ok := l.last[key]; ok && now.Sub(t) < frameWarnEvery {
		return false
	}
	if len(l.last) >= 64 {
		clear(l.last) // bounded: hostile senders cannot grow it
	}
	l.last[key] = now
	return true
}

// answerObserver answers a broker-only node's metadata fetch (a long poll:
// it may wait for the next commit) and flushes the answer.
func (n *clusterNode) answerObserver(w *bufio.Writer, frame []byte) error {
	out, err := n.raft.HandleObserverFrame(n.ctx, frame)
	if err != nil {
		return err
	}
	if _, err := w.Write(out); err != nil {
		return err
	}
	return w.Flush()
}

// controllerAPIs are the Kafka APIs the controller listener serves beside
// the forwarded ones, with the versions it implements.
var controllerAPIs = []handler.API{
	{Key: 18, Min: 0, Max: 4}, // ApiVersions
	{Key: 43, Min: 0, Max: 2}, // ElectLeaders
	{Key: 45, Min: 0, Max: 1}, // AlterPartitionReassignments
	{Key: 46, Min: 0, Max: 0}, // ListPartitionReassignments
	{Key: 55, Min: 0, Max: 2}, // DescribeQuorum
	{Key: 56, Min: 2, Max: 3}, // AlterPartition
	{Key: 60, Min: 0, Max: 2}, // DescribeCluster (KIP-919: the controllers)
	{Key: 62, Min: 0, Max: 4}, // BrokerRegistration
	{Key: 63, Min: 0, Max: 1}, // BrokerHeartbeat
	{Key: 67, Min: 0, Max: 0}, // AllocateProducerIds
}

// controllerVersions returns the version range the controller listener
// serves for key, as its ApiVersions advertises: the forwarded admin APIs
// at the handlers' versions, controllerAPIs at theirs.
func controllerVersions() []handler.API {
	out := append([]handler.API(nil), controllerAPIs...)
	out = append(out, handler.API{Key: envelopeKey, Min: 0, Max: 0}) // served to brokers only
	for _, a := range handler.APIs() {
		if forwardedKeys[a.Key] {
			out = append(out, handler.API{Key: a.Key, Min: a.Min, Max: a.Max})
		}
	}
	return out
}

// apiVersions answers ApiVersions on the controller listener, as Kafka's
// ControllerApis does, so clients and tools can speak to it; an unknown
// version is UNSUPPORTED_VERSION in v0 format (KIP-511).
func apiVersions(h wire.RequestHeader, body []byte) (kmsg.Response, error) {
	resp := kmsg.NewPtrApiVersionsResponse()
	apis := controllerVersions()
	for _, a := range apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.Key, a.Min, a.Max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	if h.Version > apis[0].Max {
		resp.SetVersion(0)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp, nil
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(h.Version)
	if err := req.ReadFrom(body); err != nil {
		return nil, err
	}
	resp.SetVersion(h.Version)
	return resp, nil
}

// handleControllerRequest answers one Kafka request of the controller
// listener. broker and epoch record whose lifecycle the connection carries.
func (n *clusterNode) handleControllerRequest(wr *wire.Request, broker *int32, epoch *int64) (kmsg.Response, error) {
	h, body := wr.Header, wr.Body
	if h.Key == 18 {
		return apiVersions(h, body)
	}
	if h.Key == envelopeKey && h.Version == 0 {
		return n.answerEnvelope(wr, body)
	}
	if kraftKeys[h.Key] {
		return n.kraftDenied(wr)
	}
	if !slices.ContainsFunc(controllerAPIs, func(a handler.API) bool { return a.Key == h.Key && h.Version >= a.Min && h.Version <= a.Max }) &&
		!forwardedKeys[h.Key] {
		return nil, fmt.Errorf("api key %d version %d is not served on the controller listener", h.Key, h.Version)
	}
	req := kmsg.RequestForKey(h.Key)
	if req == nil || h.Version < 0 || h.Version > req.MaxVersion() {
		return nil, fmt.Errorf("unsupported api key %d version %d", h.Key, h.Version)
	}
	req.SetVersion(h.Version)
	if forwardedKeys[h.Key] && !servedByController[h.Key] {
		env := n.ctlEnv.Load()
		if env == nil {
			return nil, errors.New("controller handlers not started")
		}
		resp, err := env.Dispatch(n.ctx, wr)
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, err
	}
	if resp, denied := n.controllerDenied(wr, req); denied {
		return resp, nil
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.bc.Cluster.SessionTimeout)
	defer cancel()
	switch r := req.(type) {
	case *kmsg.BrokerRegistrationRequest:
		resp := r.ResponseKind().(*kmsg.BrokerRegistrationResponse)
		var reply controller.RegisterBrokerReply
		err := n.active.do(ctx, func(c *controller.Controller, img *metadata.Image, now time.Time, next int64) ([]metadata.Record, error) {
			recs, rep, err := c.RegisterBroker(img, now, next, registrationOf(r))
			reply = rep
			return recs, err
		})
		resp.ErrorCode, _ = controllerCode(err)
		resp.BrokerEpoch = -1
		if err == nil {
			resp.BrokerEpoch = reply.BrokerEpoch
			*broker, *epoch = r.BrokerID, reply.BrokerEpoch
			n.active.silence.heard(r.BrokerID, time.Now())
		}
		return resp, nil
	case *kmsg.BrokerHeartbeatRequest:
		resp := r.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
		var reply controller.HeartbeatReply
		err := n.active.do(ctx, func(c *controller.Controller, img *metadata.Image, now time.Time, next int64) ([]metadata.Record, error) {
			recs, rep, err := c.BrokerHeartbeat(img, now, next, controller.HeartbeatRequest{BrokerID: r.BrokerID,
				BrokerEpoch: r.BrokerEpoch, CurrentMetadataOffset: r.CurrentMetadataOffset,
				WantFence: r.WantFence, WantShutDown: r.WantShutdown})
			reply = rep
			return recs, err
		})
		resp.ErrorCode, _ = controllerCode(err)
		resp.IsFenced = true
		if err == nil {
			resp.IsCaughtUp, resp.IsFenced = reply.IsCaughtUp, reply.IsFenced
			resp.ShouldShutdown = reply.ShouldShutDown
			*broker, *epoch = r.BrokerID, r.BrokerEpoch
			n.active.silence.heard(r.BrokerID, time.Now())
		}
		return resp, nil
	case *kmsg.AllocateProducerIDsRequest:
		resp := r.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
		first, size, err := n.active.allocateProducerIDs(r.BrokerID, r.BrokerEpoch)
		resp.ErrorCode, _ = controllerCode(err)
		resp.ProducerIDStart, resp.ProducerIDLen = first, int32(size)
		return resp, nil
	case *kmsg.DescribeQuorumRequest:
		return n.describeQuorum(ctx, r), nil
	case *kmsg.ElectLeadersRequest:
		return n.electLeaders(n.ctx, r), nil
	case *kmsg.AlterPartitionAssignmentsRequest:
		return n.alterPartitionReassignments(n.ctx, r), nil
	case *kmsg.ListPartitionReassignmentsRequest:
		return n.listPartitionReassignments(n.ctx, r), nil
	case *kmsg.AlterPartitionRequest:
		return n.alterPartition(ctx, r), nil
	case *kmsg.DescribeClusterRequest:
		return n.describeControllers(r), nil
	}
	return nil, fmt.Errorf("api key %d is not served on the controller listener", h.Key)
}

// registrationOf converts a BrokerRegistrationRequest.
func registrationOf(r *kmsg.BrokerRegistrationRequest) controller.RegisterBrokerRequest {
	out := controller.RegisterBrokerRequest{BrokerID: r.BrokerID, ClusterID: r.ClusterID,
		IncarnationID: metadata.UUID(r.IncarnationID), PreviousBrokerEpoch: r.PreviousBrokerEpoch}
	if r.Rack != nil {
		out.Rack = *r.Rack
	}
	for _, l := range r.Listeners {
		out.Listeners = append(out.Listeners, metadata.Endpoint{Name: l.Name, Host: l.Host, Port: l.Port, SecurityProtocol: l.SecurityProtocol})
	}
	for _, f := range r.Features {
		out.Features = append(out.Features, metadata.BrokerFeature{Name: f.Name, MinSupportedVersion: f.MinSupportedVersion, MaxSupportedVersion: f.MaxSupportedVersion})
	}
	return out
}
