package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// A broker forwards a client's admin request to the active controller
// inside an Envelope (API 58, KIP-590), as Kafka's ForwardingManager does:
// the envelope carries the request as the client sent it (header and
// body), the client's principal serialized as DefaultKafkaPrincipalBuilder
// serializes it (DefaultPrincipalData, version-prefixed) and the client's
// IP address. The controller requires CLUSTER_ACTION on the Cluster of the
// forwarding broker's principal, then answers the inner request as if the
// client had sent it on the controller listener: its ACLs are the client's.

// envelopeKey is the Envelope API key.
const envelopeKey int16 = 58

// envelopeOf wraps wr, a client's request, in an Envelope.
func envelopeOf(wr *wire.Request) (*kmsg.EnvelopeRequest, error) {
	p, err := serializePrincipal(wr.Principal)
	if err != nil {
		return nil, err
	}
	ip := net.ParseIP(wr.ClientHost)
	if ip == nil {
		return nil, fmt.Errorf("broker: client address %q is not an IP address", wr.ClientHost)
	}
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	env := kmsg.NewPtrEnvelopeRequest()
	env.RequestData = append(wire.AppendRequestHeader(nil, wr.Header), wr.Body...)
	env.RequestPrincipal, env.ClientHostAddress = p, ip
	return env, nil
}

// serializePrincipal encodes "Type:Name" as Kafka's
// DefaultKafkaPrincipalBuilder.serialize.
func serializePrincipal(principal string) ([]byte, error) {
	typ, name, ok := strings.Cut(principal, ":")
	if !ok {
		return nil, fmt.Errorf("broker: principal %q has no type", principal)
	}
	d := kmsg.NewDefaultPrincipalData()
	d.Type, d.Name = typ, name
	return d.AppendTo(nil), nil
}

// deserializePrincipal decodes DefaultKafkaPrincipalBuilder's encoding.
func deserializePrincipal(b []byte) (string, error) {
	if len(b) < 2 {
		return "", errors.New("principal too short")
	}
	if v := int16(binary.BigEndian.Uint16(b)); v != 0 {
		return "", fmt.Errorf("principal data version %d", v)
	}
	d := kmsg.NewDefaultPrincipalData()
	if err := d.ReadFrom(b); err != nil {
		return "", err
	}
	if d.Type == "" {
		return "", errors.New("principal without a type")
	}
	return d.Type + ":" + d.Name, nil
}

// forwardEnveloped sends wr to the active controller at addr in an
// Envelope and returns the inner answer. An envelope refused as a whole
// (CLUSTER_AUTHORIZATION_FAILED for this broker's principal, a principal
// the controller cannot read) is answered to the client as the inner
// request's error response with that code, as ForwardingManager does;
// NOT_CONTROLLER comes back as an error, so the broker looks for the
// active controller again.
func (n *clusterNode) forwardEnveloped(ctx context.Context, addr string, wr *wire.Request) (wire.Response, error) {
	env, err := envelopeOf(wr)
	if err != nil {
		return wire.Response{}, err
	}
	resp, err := n.forwards.do(ctx, addr, env)
	if err != nil {
		return wire.Response{}, err
	}
	er := resp.(*kmsg.EnvelopeResponse)
	switch er.ErrorCode {
	case 0:
	case kerr.NotController.Code:
		return wire.Response{}, kerr.NotController
	default:
		n.logger.Warn("the active controller refused a forwarded request's envelope", "api", kmsg.NameForKey(wr.Header.Key),
			"controller", addr, "err", kerr.ErrorForCode(er.ErrorCode))
		if out, ok := errorAnswer(wr, er.ErrorCode); ok {
			return out, nil
		}
		return wire.Response{}, kerr.ErrorForCode(er.ErrorCode)
	}
	body, err := skipResponseHeader(er.ResponseData, wire.ResponseHeaderFlexible(wr.Header.Key, wr.Header.Version))
	if err != nil {
		return wire.Response{}, err
	}
	inner := kmsg.ResponseForKey(wr.Header.Key)
	inner.SetVersion(wr.Header.Version)
	if err := inner.ReadFrom(body); err != nil {
		return wire.Response{}, fmt.Errorf("broker: forwarded %s answer: %w", kmsg.NameForKey(wr.Header.Key), err)
	}
	return wire.Response{Msg: inner}, nil
}

// forwardOwn sends wr, a request of this broker's own, to the active
// controller at addr as it is.
func (n *clusterNode) forwardOwn(ctx context.Context, addr string, wr *wire.Request) (wire.Response, error) {
	body, err := n.forwards.roundTrip(ctx, addr, wr.Header.Key, wr.Header.Version, wr.Body)
	if err != nil {
		return wire.Response{}, err
	}
	resp := kmsg.ResponseForKey(wr.Header.Key)
	resp.SetVersion(wr.Header.Version)
	if err := resp.ReadFrom(body); err != nil {
		return wire.Response{}, err
	}
	return wire.Response{Msg: resp}, nil
}

// skipResponseHeader returns the body of a response: after the
// correlation id and, in a flexible header, its tagged fields.
func skipResponseHeader(b []byte, flexible bool) ([]byte, error) {
	if len(b) < 4 {
		return nil, errors.New("broker: envelope response too short")
	}
	b = b[4:]
	if !flexible {
		return b, nil
	}
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, errors.New("broker: envelope response header tags")
	}
	b = b[w:]
	for range n {
		_, w := binary.Uvarint(b) // the tag
		if w <= 0 {
			return nil, errors.New("broker: envelope response header tags")
		}
		b = b[w:]
		size, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < size {
			return nil, errors.New("broker: envelope response header tags")
		}
		b = b[w+int(size):]
	}
	return b, nil
}

// answerEnvelope serves an Envelope on the controller listener, as
// ControllerApis.handleEnvelopeRequest and EnvelopeUtils: the sender's
// principal needs CLUSTER_ACTION on the Cluster; the inner request must be
// one a broker forwards, and is answered as the client's principal from
// the client's address.
func (n *clusterNode) answerEnvelope(wr *wire.Request, body []byte) (kmsg.Response, error) {
	req := kmsg.NewPtrEnvelopeRequest()
	req.SetVersion(wr.Header.Version)
	if err := req.ReadFrom(body); err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.EnvelopeResponse)
	if n.authz != nil && !n.authz.Authorize(acl.Session{Principal: wr.Principal, Host: wr.ClientHost}, acl.ClusterAction, acl.Cluster, acl.ClusterName) {
		n.logger.Warn("refused a forwarded request from a principal without CLUSTER_ACTION on the cluster", "principal", wr.Principal, "remote", wr.Remote)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	principal, err := deserializePrincipal(req.RequestPrincipal)
	if err != nil {
		resp.ErrorCode = kerr.PrincipalDeserializationFailure.Code
		return resp, nil
	}
	if l := len(req.ClientHostAddress); l != net.IPv4len && l != net.IPv6len {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	h, innerBody, err := wire.ParseRequestHeader(req.RequestData)
	if err != nil || !forwardedKeys[h.Key] {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	inner := &wire.Request{Header: h, Body: innerBody, Remote: wr.Remote, Principal: principal,
		ClientHost: net.IP(req.ClientHostAddress).String(), Listener: wr.Listener}
	broker, epoch := int32(-1), int64(-1)
	out, err := n.handleControllerRequest(inner, &broker, &epoch)
	if err != nil {
		return nil, fmt.Errorf("forwarded %s: %w", kmsg.NameForKey(h.Key), err)
	}
	data := wire.AppendResponseHeader(nil, h.CorrelationID, wire.ResponseHeaderFlexible(h.Key, h.Version))
	resp.ResponseData = out.AppendTo(data)
	return resp, nil
}
