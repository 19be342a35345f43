package broker

import (
	"bufio"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/wire"
)

// forwardDeadline is how long a broker looks for an active controller to
// take a forwarded request: forwardBound, or the request's own timeoutMs
// when that is shorter. Kafka's ForwardingManager retries for 60 s
// whatever the request says, but its controller answers REQUEST_TIMED_OUT
// once the request's timeout has passed; past that point nothing the
// broker could still get is an answer the client waits for.
func forwardDeadline(wr *wire.Request) time.Duration {
	req := kmsg.RequestForKey(wr.Header.Key)
	if req == nil {
		return forwardBound
	}
	t, ok := req.(kmsg.TimeoutRequest)
	if !ok {
		return forwardBound
	}
	req.SetVersion(wr.Header.Version)
	if req.ReadFrom(wr.Body) != nil || t.Timeout() <= 0 {
		return forwardBound
	}
	return min(forwardBound, time.Duration(t.Timeout())*time.Millisecond)
}

// timedOutAnswer is the answer to a forwarded request no active controller
// took in time: as ForwardingManager's onTimeout, the request's error
// response for a TimeoutException, REQUEST_TIMED_OUT on every item it
// names. A request that does not decode (the handlers would have refused
// it) has no answer, and its connection is closed.
func timedOutAnswer(wr *wire.Request) (wire.Response, bool) {
	return errorAnswer(wr, kerr.RequestTimedOut.Code)
}

// errorAnswer is a forwarded request's error response with code on every
// item it names, as Kafka's AbstractRequest.getErrorResponse.
func errorAnswer(wr *wire.Request, code int16) (wire.Response, bool) {
	req := kmsg.RequestForKey(wr.Header.Key)
	if req == nil {
		return wire.Response{}, false
	}
	req.SetVersion(wr.Header.Version)
	if req.ReadFrom(wr.Body) != nil {
		return wire.Response{}, false
	}
	msg := kafkaMessage(code)
	var resp kmsg.Response
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		out := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, msg
			out.Topics = append(out.Topics, rt)
		}
		resp = out
	case *kmsg.DeleteTopicsRequest:
		out := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
		add := func(name *string, id [16]byte) {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode, rt.ErrorMessage = name, id, code, msg
			out.Topics = append(out.Topics, rt)
		}
		if r.Version >= 6 {
			for _, t := range r.Topics {
				add(t.Topic, t.TopicID)
			}
		} else {
			for _, name := range r.TopicNames {
				add(kmsg.StringPtr(name), [16]byte{})
			}
		}
		resp = out
	case *kmsg.CreatePartitionsRequest:
		out := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, code, msg
			out.Topics = append(out.Topics, rt)
		}
		resp = out
	case *kmsg.AlterConfigsRequest:
		out := r.ResponseKind().(*kmsg.AlterConfigsResponse)
		for _, res := range r.Resources {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = res.ResourceType, res.ResourceName, code, msg
			out.Resources = append(out.Resources, rr)
		}
		resp = out
	case *kmsg.IncrementalAlterConfigsRequest:
		out := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, res := range r.Resources {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = res.ResourceType, res.ResourceName, code, msg
			out.Resources = append(out.Resources, rr)
		}
		resp = out
	case *kmsg.ElectLeadersRequest:
		out := r.ResponseKind().(*kmsg.ElectLeadersResponse)
		electLeadersFailed(r, out, code, msg)
		resp = out
	case *kmsg.AlterPartitionAssignmentsRequest:
		out := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		out.AllowReplicationFactorChange = r.Version < 1 || r.AllowReplicationFactorChange
		alterReassignmentsFailed(r, out, code, msg)
		resp = out
	case *kmsg.ListPartitionReassignmentsRequest:
		out := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		out.ErrorCode, out.ErrorMessage = code, msg
		resp = out
	case *kmsg.DescribeQuorumRequest:
		out := r.ResponseKind().(*kmsg.DescribeQuorumResponse)
		out.ErrorCode, out.ErrorMessage = code, msg
		resp = out
	case *kmsg.CreateACLsRequest:
		out := r.ResponseKind().(*kmsg.CreateACLsResponse)
		out.Results = failedItems(len(r.Creations), kmsg.NewCreateACLsResponseResult,
			func(x *kmsg.CreateACLsResponseResult) { x.ErrorCode, x.ErrorMessage = code, msg })
		resp = out
	case *kmsg.DeleteACLsRequest:
		out := r.ResponseKind().(*kmsg.DeleteACLsResponse)
		out.Results = failedItems(len(r.Filters), kmsg.NewDeleteACLsResponseResult,
			func(x *kmsg.DeleteACLsResponseResult) { x.ErrorCode, x.ErrorMessage = code, msg })
		resp = out
	default:
		return wire.Response{}, false
	}
	return wire.Response{Msg: resp}, true
}

// failedItems returns n items made by mk, each given its error by fail.
func failedItems[T any](n int, mk func() T, fail func(*T)) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = mk()
		fail(&out[i])
	}
	return out
}

// senderGoneWait is how long senderGone looks for the end of a connection.
const senderGoneWait = time.Millisecond

// senderGone reports whether the broker that forwarded the request just
// read from conn has closed the connection behind it: it gave up waiting
// (and answered its client REQUEST_TIMED_OUT), as when this controller was
// stopped and the request waited in its socket. Running it now would
// commit a write its client was told had not happened. Kafka's controller
// runs such a request anyway; Cascade drops it. A connection with more
// requests buffered, or none yet, is taken as live.
func senderGone(conn net.Conn, r *bufio.Reader) bool {
	if r.Buffered() > 0 {
		return false
	}
	if err := conn.SetReadDeadline(time.Now().Add(senderGoneWait)); err != nil {
		return true
	}
	_, err := r.Peek(1)
	if derr := conn.SetReadDeadline(time.Time{}); derr != nil {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}
