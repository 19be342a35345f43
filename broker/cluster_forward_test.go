package broker

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/wire"
)

func forwarded(r kmsg.Request) *wire.Request {
	return &wire.Request{Header: wire.RequestHeader{Key: r.Key(), Version: r.GetVersion(), Flexible: r.IsFlexible()}, Body: r.AppendTo(nil)}
}

// TestTimedOutAnswers checks that every forwarded API has a
// REQUEST_TIMED_OUT answer naming each item of the request, and that the
// forward is bounded by the request's own timeout when shorter.
func TestTimedOutAnswers(t *testing.T) {
	code := kerr.RequestTimedOut.Code
	ct := kmsg.NewPtrCreateTopicsRequest()
	ct.TimeoutMillis = 5000
	ct.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "a"}, {Topic: "b"}}
	ct.SetVersion(7)
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.SetVersion(6)
	dt.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("a")}}
	dtOld := kmsg.NewPtrDeleteTopicsRequest()
	dtOld.SetVersion(5)
	dtOld.TopicNames = []string{"a", "b"}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.SetVersion(3)
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "a"}}
	ac := kmsg.NewPtrAlterConfigsRequest()
	ac.SetVersion(2)
	ac.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "a"}}
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iac.SetVersion(1)
	iac.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "a"}}
	el := kmsg.NewPtrElectLeadersRequest()
	el.SetVersion(2)
	el.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "a", Partitions: []int32{0, 1}}}
	el0 := kmsg.NewPtrElectLeadersRequest()
	el0.SetVersion(0)
	el0.Topics = el.Topics
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.SetVersion(2)
	apr := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	apr.SetVersion(1)
	apr.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: "a",
		Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0, Replicas: []int32{1}}, {Partition: 1}}}}
	lpr := kmsg.NewPtrListPartitionReassignmentsRequest()
	lpr.SetVersion(0)
	for _, tc := range []struct {
		req   kmsg.Request
		want  int // items answered
		codes func(kmsg.Response) []int16
	}{
		{ct, 2, func(r kmsg.Response) (out []int16) {
			for _, t := range r.(*kmsg.CreateTopicsResponse).Topics {
				out = append(out, t.ErrorCode)
			}
			return out
		}},
		{dt, 1, func(r kmsg.Response) (out []int16) {
			for _, t := range r.(*kmsg.DeleteTopicsResponse).Topics {
				out = append(out, t.ErrorCode)
			}
			return out
		}},
		{dtOld, 2, func(r kmsg.Response) (out []int16) {
			for _, t := range r.(*kmsg.DeleteTopicsResponse).Topics {
				out = append(out, t.ErrorCode)
			}
			return out
		}},
		{cp, 1, func(r kmsg.Response) (out []int16) {
			for _, t := range r.(*kmsg.CreatePartitionsResponse).Topics {
				out = append(out, t.ErrorCode)
			}
			return out
		}},
		{ac, 1, func(r kmsg.Response) (out []int16) {
			for _, t := range r.(*kmsg.AlterConfigsResponse).Resources {
				out = append(out, t.ErrorCode)
			}
			return out
		}},
		{iac, 1, func(r kmsg.Response) (out []int16) {
			for _, t := range r.(*kmsg.IncrementalAlterConfigsResponse).Resources {
				out = append(out, t.ErrorCode)
			}
			return out
		}},
		{el, 1, func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.ElectLeadersResponse).ErrorCode} }},
		{el0, 2, func(r kmsg.Response) (out []int16) {
			for _, t := range r.(*kmsg.ElectLeadersResponse).Topics {
				for _, p := range t.Partitions {
					out = append(out, p.ErrorCode)
				}
			}
			return out
		}},
		{dq, 1, func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.DescribeQuorumResponse).ErrorCode} }},
		{apr, 3, func(r kmsg.Response) []int16 {
			resp := r.(*kmsg.AlterPartitionAssignmentsResponse)
			out := []int16{resp.ErrorCode}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					out = append(out, p.ErrorCode)
				}
			}
			return out
		}},
		{lpr, 1, func(r kmsg.Response) []int16 { return []int16{r.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode} }},
	} {
		name := kmsg.NameForKey(tc.req.Key())
		resp, ok := timedOutAnswer(forwarded(tc.req))
		if !ok {
			t.Fatalf("%s v%d: no answer", name, tc.req.GetVersion())
		}
		codes := tc.codes(resp.Msg)
		if len(codes) != tc.want {
			t.Fatalf("%s v%d: %d codes, want %d: %+v", name, tc.req.GetVersion(), len(codes), tc.want, resp.Msg)
		}
		for _, c := range codes {
			if c != code {
				t.Fatalf("%s v%d: code %d", name, tc.req.GetVersion(), c)
			}
		}
	}
	if _, ok := timedOutAnswer(&wire.Request{Header: wire.RequestHeader{Key: 19, Version: 7}, Body: []byte{1}}); ok {
		t.Fatal("an undecodable request got an answer")
	}
	if d := forwardDeadline(forwarded(ct)); d != 5*time.Second {
		t.Fatalf("CreateTopics with timeoutMs 5000: forwarded for %v", d)
	}
	if d := forwardDeadline(forwarded(dq)); d != forwardBound {
		t.Fatalf("DescribeQuorum: forwarded for %v, want %v", d, forwardBound)
	}
}

// TestSenderGone checks that a forwarded request is taken as abandoned
// only when its connection has ended behind it.
func TestSenderGone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		name  string
		close bool
		more  bool
		want  bool
	}{
		{"closed after the request", true, false, true},
		{"open", false, false, false},
		{"another request buffered", true, true, false},
	} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte{0, 0, 0, 1, 7})
		if tc.more {
			c.Write([]byte{0, 0, 0, 1, 8})
		}
		if tc.close {
			c.Close()
		}
		r := bufio.NewReader(s)
		if _, err := wire.ReadFrame(r, 1<<20); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // the FIN reaches this side
		if got := senderGone(s, r); got != tc.want {
			t.Errorf("%s: senderGone %v, want %v", tc.name, got, tc.want)
		}
		if !tc.close {
			// The peek must leave the connection readable.
			c.Write([]byte{0, 0, 0, 1, 9})
			if f, err := wire.ReadFrame(r, 1<<20); err != nil || len(f) != 1 || f[0] != 9 {
				t.Errorf("%s: read after the check: %v %v", tc.name, f, err)
			}
			c.Close()
		}
		s.Close()
	}
}
