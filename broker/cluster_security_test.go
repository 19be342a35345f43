package broker

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/wire"
)

// TestPrincipalSerialization checks the bytes of DefaultKafkaPrincipalBuilder's
// serialization: int16 version 0, then DefaultPrincipalData v0 (flexible):
// compact strings Type and Name, the tokenAuthenticated bool, no tags.
func TestPrincipalSerialization(t *testing.T) {
	b, err := serializePrincipal("User:alice")
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 0, 5, 'U', 's', 'e', 'r', 6, 'a', 'l', 'i', 'c', 'e', 0, 0}
	if !bytes.Equal(b, want) {
		t.Fatalf("serialized % x, want % x", b, want)
	}
	p, err := deserializePrincipal(b)
	if err != nil || p != "User:alice" {
		t.Fatalf("deserialized %q, %v", p, err)
	}
	for _, bad := range [][]byte{nil, {0}, {0, 1, 5, 'U', 's', 'e', 'r', 1, 0, 0}, {0, 0, 1, 1, 0, 0}} {
		if p, err := deserializePrincipal(bad); err == nil {
			t.Errorf("deserialized % x as %q", bad, p)
		}
	}
	if _, err := serializePrincipal(""); err == nil {
		t.Error("a principal without a type serialized")
	}
}

func TestEnvelopeOf(t *testing.T) {
	id := "client"
	wr := &wire.Request{Header: wire.RequestHeader{Key: 19, Version: 7, CorrelationID: 42, ClientID: &id, Flexible: true},
		Body: []byte{1, 2, 3}, Principal: "User:bob", ClientHost: "10.1.2.3"}
	env, err := envelopeOf(wr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(env.ClientHostAddress, []byte{10, 1, 2, 3}) {
		t.Fatalf("client address % x", env.ClientHostAddress)
	}
	h, body, err := wire.ParseRequestHeader(env.RequestData)
	if err != nil || h.Key != 19 || h.Version != 7 || h.CorrelationID != 42 || *h.ClientID != "client" || !bytes.Equal(body, []byte{1, 2, 3}) {
		t.Fatalf("inner request %+v % x %v", h, body, err)
	}
	if p, _ := deserializePrincipal(env.RequestPrincipal); p != "User:bob" {
		t.Fatalf("principal %q", p)
	}
	wr.ClientHost = "not an address"
	if _, err := envelopeOf(wr); err == nil {
		t.Fatal("an envelope without a client address")
	}
}

func TestSkipResponseHeader(t *testing.T) {
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.SetVersion(7)
	body := resp.AppendTo(nil)
	for _, hdr := range [][]byte{
		{0, 0, 0, 9, 0},             // no tags
		{0, 0, 0, 9, 1, 3, 2, 7, 7}, // one tag of two bytes
	} {
		got, err := skipResponseHeader(append(append([]byte(nil), hdr...), body...), true)
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("header % x: body % x, %v", hdr, got, err)
		}
	}
	if _, err := skipResponseHeader([]byte{0, 0, 0, 9, 1, 3, 5}, true); err == nil {
		t.Error("a tag longer than the header accepted")
	}
	if got, err := skipResponseHeader([]byte{0, 0, 0, 9, 8}, false); err != nil || !bytes.Equal(got, []byte{8}) {
		t.Errorf("non-flexible: % x, %v", got, err)
	}
}

// TestErrorAnswerACLs: an envelope refused as a whole answers CreateAcls
// and DeleteAcls with the code on every creation and filter.
func TestErrorAnswerACLs(t *testing.T) {
	code := kerr.ClusterAuthorizationFailed.Code
	ca := kmsg.NewPtrCreateACLsRequest()
	ca.SetVersion(3)
	ca.Creations = make([]kmsg.CreateACLsRequestCreation, 2)
	da := kmsg.NewPtrDeleteACLsRequest()
	da.SetVersion(3)
	da.Filters = make([]kmsg.DeleteACLsRequestFilter, 3)
	for _, req := range []kmsg.Request{ca, da} {
		wr := &wire.Request{Header: wire.RequestHeader{Key: req.Key(), Version: req.GetVersion()}, Body: req.AppendTo(nil)}
		out, ok := errorAnswer(wr, code)
		if !ok {
			t.Fatalf("%s: no answer", kmsg.NameForKey(req.Key()))
		}
		var codes []int16
		switch r := out.Msg.(type) {
		case *kmsg.CreateACLsResponse:
			for _, res := range r.Results {
				codes = append(codes, res.ErrorCode)
			}
		case *kmsg.DeleteACLsResponse:
			for _, res := range r.Results {
				codes = append(codes, res.ErrorCode)
			}
		}
		if len(codes) == 0 || slices.ContainsFunc(codes, func(c int16) bool { return c != code }) {
			t.Errorf("%s: codes %v", kmsg.NameForKey(req.Key()), codes)
		}
	}
}

// TestSetErrorCode: every response the controller listener refuses for
// authorization has the top-level ErrorCode setErrorCode sets.
func TestSetErrorCode(t *testing.T) {
	keys := []int16{}
	for k := range controllerOperation {
		keys = append(keys, k)
	}
	for k := range kraftKeys {
		keys = append(keys, k)
	}
	for _, k := range keys {
		resp := kmsg.ResponseForKey(k)
		setErrorCode(resp, kerr.ClusterAuthorizationFailed.Code)
		if got := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode").Int(); got != int64(kerr.ClusterAuthorizationFailed.Code) {
			t.Errorf("%s: ErrorCode %d", kmsg.NameForKey(k), got)
		}
	}
}
