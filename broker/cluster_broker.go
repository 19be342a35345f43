package broker

import (
	"bufio"
	"context"
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/quorum"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// ctlClient sends requests to controller listeners: one connection per
// address, one request at a time, redialled after any error.
type ctlClient struct {
	clientID string
	timeout  time.Duration
	dial     DialFunc

	mu    sync.Mutex
	conns map[string]*ctlConn
	corr  int32
}

type ctlConn struct {
	c net.Conn
	r *bufio.Reader
}

func newCtlClient(clientID string, timeout time.Duration, dial DialFunc) *ctlClient {
	return &ctlClient{clientID: clientID, timeout: timeout, dial: dial, conns: map[string]*ctlConn{}}
}

// roundTrip sends body as request key/version to addr and returns the
// response body (after its header).
func (c *ctlClient) roundTrip(ctx context.Context, addr string, key, version int16, body []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc := c.conns[addr]
	if cc == nil {
		conn, err := dialWithin(ctx, c.dial, addr, min(c.timeout, 2*time.Second))
		if err != nil {
			return nil, err
		}
		cc = &ctlConn{c: conn, r: bufio.NewReader(conn)}
		c.conns[addr] = cc
	}
	fail := func(err error) ([]byte, error) {
		cc.c.Close()
		delete(c.conns, addr)
		return nil, err
	}
	c.corr++
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	out, at := wire.AppendFrameLength(nil)
	out = wire.AppendRequestHeader(out, wire.RequestHeader{Key: key, Version: version, CorrelationID: c.corr,
		ClientID: &c.clientID, Flexible: req.IsFlexible()})
	out = append(out, body...)
	wire.FinishFrame(out, at, 0)
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	cc.c.SetDeadline(deadline)
	if _, err := cc.c.Write(out); err != nil {
		return fail(err)
	}
	frame, err := wire.ReadFrame(cc.r, quorum.DefaultMaxFrameBytes)
	if err != nil {
		return fail(err)
	}
	hdr := 4
	if wire.ResponseHeaderFlexible(key, version) {
		hdr = 5 // an empty tag section: the controller listener writes none
	}
	if len(frame) < hdr || int32(frame[0])<<24|int32(frame[1])<<16|int32(frame[2])<<8|int32(frame[3]) != c.corr {
		return fail(errors.New("controller response out of order"))
	}
	return frame[hdr:], nil
}

// do sends req to addr and decodes the response.
func (c *ctlClient) do(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	body, err := c.roundTrip(ctx, addr, req.Key(), req.GetVersion(), req.AppendTo(nil))
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, err
	}
	return resp, nil
}

func (c *ctlClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, cc := range c.conns {
		cc.c.Close()
		delete(c.conns, a)
	}
}

// runLifecycle is the broker side's lifecycle, as Kafka's
// BrokerLifecycleManager: register with the active controller (a new
// incarnation id per process), then heartbeat every
// broker.heartbeat.interval.ms with the metadata offset applied here; the
// controller unfences the broker once that offset reaches its
// registration. A STALE_BROKER_EPOCH answer (fenced and replaced, or a
// new controller that lost the registration) registers again; any other
// failure retries at the next interval, against the leader then known.
func (n *clusterNode) runLifecycle() {
	var incarnation [16]byte
	if _, err := cryptorand.Read(incarnation[:]); err != nil {
		n.logger.Error("broker incarnation id", "err", err)
		return
	}
	fenced := true
	for {
		wait := n.bc.Cluster.HeartbeatInterval
		if fenced {
			// As BrokerLifecycleManager while starting: heartbeat
			// soon, so the broker is unfenced as soon as it caught up.
			wait = min(wait, 200*time.Millisecond)
		}
		_, addr, ok := n.leader()
		if ok {
			if n.epoch.Load() < 0 {
				n.register(addr, incarnation)
			}
			if n.epoch.Load() >= 0 {
				fenced = n.heartbeat(addr, fenced)
			}
		}
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (n *clusterNode) register(addr string, incarnation [16]byte) {
	r := kmsg.NewPtrBrokerRegistrationRequest()
	r.SetVersion(4)
	r.BrokerID, r.ClusterID, r.IncarnationID = n.self, n.clusterID, incarnation
	r.PreviousBrokerEpoch = n.previousEpoch
	if n.bc.Cluster.Rack != "" {
		rack := n.bc.Cluster.Rack
		r.Rack = &rack
	}
	for _, e := range n.endpoints {
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name, l.Host, l.Port, l.SecurityProtocol = e.Name, e.Host, e.Port, e.SecurityProtocol
		r.Listeners = append(r.Listeners, l)
	}
	f := kmsg.NewBrokerRegistrationRequestFeature()
	f.Name, f.MinSupportedVersion, f.MaxSupportedVersion = "metadata.version", 1, metadata.MetadataVersion
	r.Features = append(r.Features, f)
	ctx, cancel := context.WithTimeout(n.ctx, n.bc.Cluster.SessionTimeout)
	defer cancel()
	resp, err := n.heartbeats.do(ctx, addr, r)
	if err != nil {
		n.logger.Debug("broker registration", "controller", addr, "err", err)
		return
	}
	rr := resp.(*kmsg.BrokerRegistrationResponse)
	if rr.ErrorCode != 0 {
		n.logger.Info("broker registration refused", "controller", addr, "err", kerr.ErrorForCode(rr.ErrorCode))
		return
	}
	n.epoch.Store(rr.BrokerEpoch)
	n.logger.Info("broker registered", "controller", addr, "broker.epoch", rr.BrokerEpoch)
}

// heartbeat sends one heartbeat and returns whether the broker is fenced.
func (n *clusterNode) heartbeat(addr string, fenced bool) bool {
	r := kmsg.NewPtrBrokerHeartbeatRequest()
	r.SetVersion(1)
	r.BrokerID, r.BrokerEpoch = n.self, n.epoch.Load()
	r.CurrentMetadataOffset = n.broker.Image().Offset
	ctx, cancel := context.WithTimeout(n.ctx, n.bc.Cluster.SessionTimeout)
	defer cancel()
	resp, err := n.heartbeats.do(ctx, addr, r)
	if err != nil {
		n.logger.Debug("broker heartbeat", "controller", addr, "err", err)
		return fenced
	}
	hr := resp.(*kmsg.BrokerHeartbeatResponse)
	switch hr.ErrorCode {
	case 0:
	case kerr.StaleBrokerEpoch.Code:
		n.logger.Info("broker epoch is stale; registering again", "broker.epoch", r.BrokerEpoch)
		n.epoch.Store(-1)
		return true
	default:
		return fenced
	}
	if fenced != hr.IsFenced {
		n.logger.Info("broker fencing changed", "fenced", hr.IsFenced, "metadata.offset", r.CurrentMetadataOffset)
	}
	return hr.IsFenced
}

// clusterDispatcher is the client listener's dispatcher on a cluster node:
// the admin requests of forwardedKeys go to the active controller, the rest
// to the handlers.
type clusterDispatcher struct {
	n   *clusterNode
	env wire.Dispatcher
}

// forwardBound bounds how long a forwarded request looks for an active
// controller, across elections.
const forwardBound = 30 * time.Second

func (d *clusterDispatcher) Dispatch(ctx context.Context, wr *wire.Request) (wire.Response, error) {
	if wr.Header.Key == 18 {
		resp, err := d.env.Dispatch(ctx, wr)
		return withControllerAPIs(resp), err
	}
	if !forwardedKeys[wr.Header.Key] {
		return d.env.Dispatch(ctx, wr)
	}
	if req := kmsg.RequestForKey(wr.Header.Key); req == nil || wr.Header.Version > req.MaxVersion() {
		return d.env.Dispatch(ctx, wr) // the handlers refuse it as a single node does
	}
	if !namesTopics(wr) {
		return d.env.Dispatch(ctx, wr)
	}
	ctx, cancel := context.WithTimeout(ctx, forwardDeadline(wr))
	defer cancel()
	resp, err := d.forwardLoop(ctx, wr)
	if err != nil {
		if to, ok := timedOutAnswer(wr); ok {
			d.n.logger.Info("no active controller took a forwarded request", "api", kmsg.NameForKey(wr.Header.Key), "err", err)
			return to, nil
		}
		return wire.Response{}, fmt.Errorf("broker: forwarding %s: %w", kmsg.NameForKey(wr.Header.Key), err)
	}
	return resp, nil
}

// namesTopics reports whether a request of forwardedKeys must go to the
// controller: every one but an AlterConfigs or IncrementalAlterConfigs
// without a TOPIC resource. BROKER_LOGGER and BROKER resources name this
// node (or the cluster-wide defaults, which Cascade does not change at run
// time) and are answered here, as a single node answers them. A request
// that does not decode goes to the handlers, which close the connection.
func namesTopics(wr *wire.Request) bool {
	var types []kmsg.ConfigResourceType
	switch wr.Header.Key {
	case 33:
		r := kmsg.NewPtrAlterConfigsRequest()
		r.SetVersion(wr.Header.Version)
		if r.ReadFrom(wr.Body) != nil {
			return false
		}
		for _, res := range r.Resources {
			types = append(types, res.ResourceType)
		}
	case 44:
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r.SetVersion(wr.Header.Version)
		if r.ReadFrom(wr.Body) != nil {
			return false
		}
		for _, res := range r.Resources {
			types = append(types, res.ResourceType)
		}
	default:
		return true
	}
	return slices.Contains(types, kmsg.ConfigResourceTypeTopic)
}

// forwardOnce sends the request to the active controller known now: this
// node's own controller handlers when it is the leader. A client's request
// goes in an Envelope with the client's principal; a request the broker
// makes itself (no principal: auto-creation, internal topics) goes as it
// is, authorized as this broker's principal on the controller listener, as
// Kafka's broker sends it over its controller channel. With an authorizer
// that holds on this node's own controller too, whose listener alone
// knows the principal this node presents.
func (d *clusterDispatcher) forwardOnce(ctx context.Context, wr *wire.Request) (wire.Response, error) {
	id, addr, ok := d.n.leader()
	if !ok {
		return wire.Response{}, errors.New("no active controller known")
	}
	if own := wr.Principal == ""; own && (id != d.n.self || d.n.bc.AuthorizerEnabled) {
		return d.n.forwardOwn(ctx, addr, wr)
	}
	if id == d.n.self {
		if servedByController[wr.Header.Key] {
			return d.n.serveLocally(wr)
		}
		return d.n.ctlEnv.Load().Dispatch(ctx, wr)
	}
	return d.n.forwardEnveloped(ctx, addr, wr)
}

// hasNotController reports whether a forwarded answer says NOT_CONTROLLER
// for any of its topics or resources.
func hasNotController(resp kmsg.Response) bool {
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		return anyNotController(r.Topics, func(t kmsg.CreateTopicsResponseTopic) int16 { return t.ErrorCode })
	case *kmsg.DeleteTopicsResponse:
		return anyNotController(r.Topics, func(t kmsg.DeleteTopicsResponseTopic) int16 { return t.ErrorCode })
	case *kmsg.CreatePartitionsResponse:
		return anyNotController(r.Topics, func(t kmsg.CreatePartitionsResponseTopic) int16 { return t.ErrorCode })
	case *kmsg.AlterConfigsResponse:
		return anyNotController(r.Resources, func(t kmsg.AlterConfigsResponseResource) int16 { return t.ErrorCode })
	case *kmsg.IncrementalAlterConfigsResponse:
		return anyNotController(r.Resources, func(t kmsg.IncrementalAlterConfigsResponseResource) int16 { return t.ErrorCode })
	case *kmsg.CreateACLsResponse:
		return anyNotController(r.Results, func(t kmsg.CreateACLsResponseResult) int16 { return t.ErrorCode })
	case *kmsg.DeleteACLsResponse:
		return anyNotController(r.Results, func(t kmsg.DeleteACLsResponseResult) int16 { return t.ErrorCode })
	}
	return notControllerAnswer(resp)
}

func anyNotController[T any](xs []T, code func(T) int16) bool {
	return slices.ContainsFunc(xs, func(x T) bool { return code(x) == kerr.NotController.Code })
}

// brokerWriter is the broker store's metadata.Writer, for the writes the
// broker side makes itself: auto-creation of topics (EnsureTopic) and
// producer id blocks. The admin requests clients send never reach it: the
// clusterDispatcher forwards them whole.
type brokerWriter struct{ n *clusterNode }

// errForwardedWhole is what the admin writes a broker never plans itself
// answer: clients' admin requests reach the controller through
// clusterDispatcher.
var errForwardedWhole = &metadata.Error{Kind: metadata.ErrNotController,
	Message: "admin requests are forwarded to the active controller whole"}

func (w *brokerWriter) CreateTopics(reqs []metadata.CreateTopic, validateOnly bool) []metadata.CreateResult {
	ctx, cancel := context.WithTimeout(w.n.ctx, 10*time.Second)
	defer cancel()
	out := make([]metadata.CreateResult, len(reqs))
	r := kmsg.NewPtrCreateTopicsRequest()
	r.SetVersion(7)
	r.TimeoutMillis, r.ValidateOnly = 10000, validateOnly
	for i, q := range reqs {
		out[i].Name = q.Name
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = q.Name, q.NumPartitions, q.ReplicationFactor
		for _, a := range q.Assignments {
			ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			ra.Partition, ra.Replicas = a.Partition, a.Replicas
			t.ReplicaAssignment = append(t.ReplicaAssignment, ra)
		}
		for k, v := range q.Configs {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, v
			t.Configs = append(t.Configs, c)
		}
		r.Topics = append(r.Topics, t)
	}
	body := r.AppendTo(nil)
	resp, err := (&clusterDispatcher{n: w.n}).forwardLoop(ctx, &wire.Request{
		Header: wire.RequestHeader{Key: r.Key(), Version: r.Version, Flexible: r.IsFlexible()}, Body: body})
	if err != nil {
		for i := range out {
			out[i].Err = &metadata.Error{Kind: metadata.ErrNotController, Message: err.Error()}
		}
		return out
	}
	cr, _ := resp.Msg.(*kmsg.CreateTopicsResponse)
	for i := range out {
		if cr == nil || i >= len(cr.Topics) {
			out[i].Err = &metadata.Error{Kind: metadata.ErrStorage, Message: "short CreateTopics answer from the controller"}
			continue
		}
		t := cr.Topics[i]
		if t.ErrorCode != 0 {
			msg := kerr.ErrorForCode(t.ErrorCode).Error()
			if t.ErrorMessage != nil {
				msg = *t.ErrorMessage
			}
			out[i].Err = codeError(t.ErrorCode, msg)
			continue
		}
		if validateOnly {
			continue
		}
		if out[i].Topic = w.n.awaitTopic(ctx, out[i].Name); out[i].Topic == nil {
			// Created, but not yet seen here: as Kafka's
			// LEADER_NOT_AVAILABLE after auto-creation, the client
			// retries and finds it.
			out[i].Err = &metadata.Error{Kind: metadata.ErrTopicExists, Message: "Topic '" + out[i].Name + "' was created but is not yet known to this broker"}
		}
	}
	return out
}

// awaitTopic waits (bounded by ctx) until this node has applied the batch
// that created topic name, which the controller answered once committed:
// the caller (auto-creation, a coordinator loading its internal topic)
// goes on to use the topic here. It returns nil if ctx ends first.
func (n *clusterNode) awaitTopic(ctx context.Context, name string) *metadata.Topic {
	for {
		if t, ok := n.broker.Image().Topic(name); ok {
			return t
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// codeError turns a Kafka code from the controller back into a metadata
// error the handlers map to the same code.
func codeError(code int16, msg string) error {
	switch code {
	case kerr.TopicAlreadyExists.Code:
		return &metadata.Error{Kind: metadata.ErrTopicExists, Message: msg}
	case kerr.InvalidReplicationFactor.Code:
		return &metadata.Error{Kind: metadata.ErrInvalidReplicationFactor, Message: msg}
	case kerr.InvalidTopicException.Code:
		return &metadata.Error{Kind: metadata.ErrInvalidTopic, Message: msg}
	case kerr.NotController.Code:
		return &metadata.Error{Kind: metadata.ErrNotController, Message: msg}
	}
	return &metadata.Error{Kind: metadata.ErrStorage, Message: msg}
}

// forwardLoop is Dispatch's retry loop for a request the broker side makes.
func (d *clusterDispatcher) forwardLoop(ctx context.Context, wr *wire.Request) (wire.Response, error) {
	for {
		resp, err := d.forwardOnce(ctx, wr)
		if err == nil && !hasNotController(resp.Msg) {
			return resp, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("no active controller answered")
			}
			return wire.Response{}, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (w *brokerWriter) DeleteTopics(reqs []metadata.DeleteTopic) []metadata.DeleteResult {
	out := make([]metadata.DeleteResult, len(reqs))
	for i, r := range reqs {
		out[i] = metadata.DeleteResult{Name: r.Name, ID: r.ID, Err: errForwardedWhole}
	}
	return out
}

func (w *brokerWriter) CreatePartitions(reqs []metadata.CreatePartitions, _ bool) []metadata.CreatePartitionsResult {
	out := make([]metadata.CreatePartitionsResult, len(reqs))
	for i, r := range reqs {
		out[i] = metadata.CreatePartitionsResult{Name: r.Name, Err: errForwardedWhole}
	}
	return out
}

func (w *brokerWriter) IncrementalAlterTopicConfigs(string, []metadata.ConfigOp, bool) error {
	return errForwardedWhole
}

func (w *brokerWriter) AlterTopicConfigs(string, map[string]*string, bool) error {
	return errForwardedWhole
}

// AllocateProducerIDs asks the active controller for a block
// (AllocateProducerIds, as Kafka's RPCProducerIdManager).
func (w *brokerWriter) AllocateProducerIDs() (int64, int64, error) {
	ctx, cancel := context.WithTimeout(w.n.ctx, 10*time.Second)
	defer cancel()
	for {
		id, addr, ok := w.n.leader()
		var err error
		if ok && id == w.n.self {
			first, size, err2 := w.n.active.allocateProducerIDs(w.n.self, w.n.epoch.Load())
			if err2 == nil {
				return first, size, nil
			}
			err = err2
		} else if ok {
			r := kmsg.NewPtrAllocateProducerIDsRequest()
			r.BrokerID, r.BrokerEpoch = w.n.self, w.n.epoch.Load()
			var resp kmsg.Response
			resp, err = w.n.forwards.do(ctx, addr, r)
			if err == nil {
				ar := resp.(*kmsg.AllocateProducerIDsResponse)
				if ar.ErrorCode == 0 {
					return ar.ProducerIDStart, int64(ar.ProducerIDLen), nil
				}
				err = kerr.ErrorForCode(ar.ErrorCode)
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return 0, 0, &metadata.Error{Kind: metadata.ErrNotController, Message: "allocating producer ids: " + err.Error()}
		case <-time.After(100 * time.Millisecond):
		}
	}
}
