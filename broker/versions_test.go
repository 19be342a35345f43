package broker_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/broker/handler"
	"github.com/cascade-kafka/cascade/broker/wire"
)

// fillRequest gives every array of v one element and every string the name
// "v", recursively, so that each handler has a topic, partition, group or id
// to work on rather than an empty request.
func fillRequest(v reflect.Value, topicID [16]byte, depth int) {
	if depth > 6 {
		return
	}
	switch v.Kind() {
	case reflect.Array:
		if v.Type() == reflect.TypeOf(topicID) {
			v.Set(reflect.ValueOf(topicID))
		}
	case reflect.Pointer:
		if v.Type().Elem().Kind() == reflect.String {
			s := "v"
			v.Set(reflect.ValueOf(&s))
		}
	case reflect.String:
		v.SetString("v")
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		if d, ok := s.Index(0).Addr().Interface().(interface{ Default() }); ok {
			d.Default()
		}
		fillRequest(s.Index(0), topicID, depth+1)
		v.Set(s)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Field(i); f.CanSet() && v.Type().Field(i).Name != "UnknownTags" {
				fillRequest(f, topicID, depth+1)
			}
		}
	}
}

// errorAnywhere reports whether any ErrorCode field in v is code.
func errorAnywhere(v reflect.Value, code int16) bool {
	switch v.Kind() {
	case reflect.Pointer:
		return !v.IsNil() && errorAnywhere(v.Elem(), code)
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if errorAnywhere(v.Index(i), code) {
				return true
			}
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			if v.Type().Field(i).Name == "ErrorCode" && f.Kind() == reflect.Int16 && f.Int() == int64(code) {
				return true
			}
			if errorAnywhere(f, code) {
				return true
			}
		}
	}
	return false
}

// topicAPIs are the APIs whose filled request names the existing topic "v"
// by name or id at every version, so that an unknown topic in the answer
// means a version whose topic addressing the handler does not implement.
var topicAPIs = map[int16]bool{0: true, 1: true, 2: true, 3: true, 8: true, 9: true, 21: true, 23: true, 61: true}

// TestEveryAdvertisedVersionIsServed sends every version of every
// registered API through the real dispatcher of a running broker and checks
// that it decodes, is handled, and answers at that version with a response
// the codec round-trips, with no UNSUPPORTED_VERSION anywhere inside
// (Produce v0-2 excepted: Kafka 4 advertises them and closes the connection,
// KAFKA-18659).
// A range that outgrows its handler fails here.
func TestEveryAdvertisedVersionIsServed(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"group.initial.rebalance.delay.ms": "0"})
	topic := createTopic(t, b, "v", 1)
	env := b.Handlers()
	id := "versions"
	for _, api := range handler.APIs() {
		for v := api.Min; v <= api.Max; v++ {
			req := kmsg.RequestForKey(api.Key)
			req.SetVersion(v)
			fillRequest(reflect.ValueOf(req).Elem(), topic.ID, 0)
			req.SetVersion(v)
			switch r := req.(type) {
			case *kmsg.DeleteTopicsRequest:
				r.TopicNames = []string{"absent"}
				r.Topics[0].Topic, r.Topics[0].TopicID = kmsg.StringPtr("absent"), [16]byte{}
			case *kmsg.FetchRequest:
				r.MaxWaitMillis, r.ReplicaID, r.ReplicaState.ID = 0, -1, -1
			case *kmsg.ProduceRequest:
				r.Acks = 1
			case *kmsg.ApiVersionsRequest:
				r.ClientSoftwareName, r.ClientSoftwareVersion = "v", "1"
			// Kafka closes the connection on an ACL request with an
			// UNKNOWN (zero) enum, so these name a topic ACL.
			case *kmsg.DescribeACLsRequest:
				r.ResourceType, r.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral
				r.Operation, r.PermissionType = kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
			case *kmsg.CreateACLsRequest:
				for i := range r.Creations {
					c := &r.Creations[i]
					c.ResourceType, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral
					c.Operation, c.PermissionType = kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
				}
			case *kmsg.DeleteACLsRequest:
				for i := range r.Filters {
					f := &r.Filters[i]
					f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral
					f.Operation, f.PermissionType = kmsg.ACLOperationAll, kmsg.ACLPermissionTypeAllow
				}
			}
			name := kmsg.NameForKey(api.Key)
			h := wire.RequestHeader{Key: api.Key, Version: v, CorrelationID: 1, ClientID: &id, Flexible: req.IsFlexible()}
			frame := req.AppendTo(wire.AppendRequestHeader(nil, h))
			ph, body, err := wire.ParseRequestHeader(frame)
			if err != nil {
				t.Fatalf("%s v%d header: %v", name, v, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			done := make(chan struct{})
			var resp wire.Response
			go func() {
				defer close(done)
				resp, err = env.Dispatch(ctx, &wire.Request{Header: ph, Body: body})
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("%s v%d: handler did not return", name, v)
			}
			cancel()
			if api.Key == 0 && v < 3 {
				// Kafka 4 advertises Produce v0-2 for librdkafka but
				// closes the connection on them (KAFKA-18659).
				if err == nil {
					t.Errorf("%s v%d: answered, Kafka closes the connection", name, v)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s v%d: dispatch closed the connection: %v", name, v, err)
				continue
			}
			var enc []byte
			switch {
			case resp.Body != nil:
				var buf bytes.Buffer
				if _, err := resp.Body.WriteTo(&buf); err != nil {
					t.Fatal(err)
				}
				resp.Body.Release()
				enc = buf.Bytes()
			case resp.Msg != nil:
				if resp.Msg.GetVersion() != v {
					t.Errorf("%s v%d: answered at v%d", name, v, resp.Msg.GetVersion())
				}
				enc = resp.Msg.AppendTo(nil)
			default:
				t.Errorf("%s v%d: no response", name, v)
				continue
			}
			dec := req.ResponseKind()
			dec.SetVersion(v)
			if err := dec.ReadFrom(enc); err != nil {
				t.Errorf("%s v%d: response does not decode at its version: %v", name, v, err)
				continue
			}
			if again := dec.AppendTo(nil); !bytes.Equal(again, enc) {
				t.Errorf("%s v%d: response does not round-trip", name, v)
			}
			if errorAnywhere(reflect.ValueOf(dec), kerr.UnsupportedVersion.Code) {
				t.Errorf("%s v%d: advertised but answered UNSUPPORTED_VERSION", name, v)
			}
			if topicAPIs[api.Key] && (errorAnywhere(reflect.ValueOf(dec), kerr.UnknownTopicOrPartition.Code) ||
				errorAnywhere(reflect.ValueOf(dec), kerr.UnknownTopicID.Code)) {
				t.Errorf("%s v%d: the existing topic is unknown at this version", name, v)
			}
		}
	}
}
