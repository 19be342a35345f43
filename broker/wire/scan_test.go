package wire

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// realisticRequest builds a well-formed request of a decodeCapped key with
// n elements in its largest array and varied, non-zero field values, so
// that a scanner that misreads a field's layout goes astray (the crafted
// zero-filled frames of TestSizeEstimateBoundsDecode parse alike under many
// layouts).
func realisticRequest(key int16, n int, rng *rand.Rand) kmsg.Request {
	str := func(i int) string { return fmt.Sprintf("name-%d-%x", i, rng.Uint32()) }
	ptr := func(s string) *string { return &s }
	blob := func(size int) []byte {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	switch key {
	case offsetCommitKey:
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.Generation, r.MemberID, r.InstanceID = "group", 7, "member-1", ptr("instance")
		for t := 0; t < 4; t++ {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic, rt.TopicID = str(t), [16]byte{byte(t + 1), 2, 3}
			for p := 0; p < n/4; p++ {
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch = int32(p), rng.Int64N(1<<40), 3
				if p%3 != 0 {
					rp.Metadata = ptr(str(p))
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
		return r
	case txnOffsetCommitKey:
		r := kmsg.NewPtrTxnOffsetCommitRequest()
		r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch = "txn", "group", 99, 2
		r.Generation, r.MemberID, r.InstanceID = 5, "member", ptr("instance")
		for t := 0; t < 4; t++ {
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic, rt.TopicID = str(t), [16]byte{byte(t + 1)}
			for p := 0; p < n/4; p++ {
				rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = int32(p), rng.Int64N(1<<40), 4, ptr(str(p))
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
		return r
	case listOffsetsKey:
		r := kmsg.NewPtrListOffsetsRequest()
		r.ReplicaID, r.IsolationLevel, r.TimeoutMillis = -1, 1, 3000
		for t := 0; t < 4; t++ {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = str(t)
			for p := 0; p < n/4; p++ {
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp, rp.MaxNumOffsets = int32(p), 2, -1, 1
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
		return r
	case describeConfigsKey:
		r := kmsg.NewPtrDescribeConfigsRequest()
		r.IncludeSynonyms, r.IncludeDocumentation = true, true
		for i := 0; i < n; i++ {
			rr := kmsg.NewDescribeConfigsRequestResource()
			rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, str(i)
			if i%2 == 0 {
				rr.ConfigNames = []string{"retention.ms", "cleanup.policy", str(i)}
			}
			r.Resources = append(r.Resources, rr)
		}
		return r
	case createTopicsKey:
		r := kmsg.NewPtrCreateTopicsRequest()
		r.TimeoutMillis, r.ValidateOnly = 30000, true
		for t := 0; t < n/64+1; t++ {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = str(t), -1, -1
			for p := 0; p < 64; p++ {
				ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				ra.Partition, ra.Replicas = int32(p), []int32{1, 2, 3}
				rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
			}
			for c := 0; c < 3; c++ {
				rc := kmsg.NewCreateTopicsRequestTopicConfig()
				rc.Name, rc.Value = str(c), ptr(str(c))
				rt.Configs = append(rt.Configs, rc)
			}
			r.Topics = append(r.Topics, rt)
		}
		return r
	case joinGroupKey:
		r := kmsg.NewPtrJoinGroupRequest()
		r.Group, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = "group", 45000, 60000
		r.MemberID, r.InstanceID, r.ProtocolType, r.Reason = "member", ptr("instance"), "consumer", ptr("joining")
		for i := 0; i < n/64+1; i++ {
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name, p.Metadata = str(i), blob(512)
			r.Protocols = append(r.Protocols, p)
		}
		return r
	case syncGroupKey:
		r := kmsg.NewPtrSyncGroupRequest()
		r.Group, r.Generation, r.MemberID = "group", 3, "leader"
		r.InstanceID, r.ProtocolType, r.Protocol = ptr("instance"), ptr("consumer"), ptr("cooperative-sticky")
		for i := 0; i < n/8+1; i++ {
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID, a.MemberAssignment = str(i), blob(256)
			r.GroupAssignment = append(r.GroupAssignment, a)
		}
		return r
	}
	panic("no builder for key " + fmt.Sprint(key))
}

// TestScanRealisticRequests checks, for every decodeCapped API at every
// version, that the scan accepts a well-formed request with varied values
// and sizes it at least as large as kmsg's decode, and not grossly larger,
// so that legitimate requests are neither under-reserved nor refused.
func TestScanRealisticRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, key := range []int16{listOffsetsKey, offsetCommitKey, joinGroupKey, syncGroupKey, createTopicsKey,
		txnOffsetCommitKey, describeConfigsKey} {
		max := kmsg.RequestForKey(key).MaxVersion()
		for v := int16(0); v <= max; v++ {
			req := realisticRequest(key, 4000, rng)
			req.SetVersion(v)
			body := req.AppendTo(nil)
			est, ok := sizeEstimate(key, v, body)
			if !ok {
				t.Errorf("%s v%d: scan refuses a well-formed %d-byte request", kmsg.NameForKey(key), v, len(body))
				continue
			}
			// The scan walks exactly the fields kmsg reads: it ends at
			// the body's end.
			sc := scanner{b: body, flexible: isFlexible(key, v)}
			if sc.scanBody(key, v); sc.bad || len(sc.b) != 0 {
				t.Errorf("%s v%d: scan ends with %d of %d bytes left (bad %t)", kmsg.NameForKey(key), v, len(sc.b), len(body), sc.bad)
			}
			alloc := int64(decodeAlloc(key, v, body))
			if est < alloc {
				t.Errorf("%s v%d: estimated %d B, decoding allocated %d B", kmsg.NameForKey(key), v, est, alloc)
			}
			if est > 2*alloc+ReservationSlack {
				t.Errorf("%s v%d: estimated %d B, more than twice the %d B decoding allocated", kmsg.NameForKey(key), v, est, alloc)
			}
			// A scan of any truncation never panics and never sizes
			// below the bytes it was given.
			for _, cut := range []int{1, len(body) / 3, len(body) - 1} {
				if e, ok := sizeEstimate(key, v, body[:cut]); ok && e < int64(cut) {
					t.Errorf("%s v%d: truncated estimate %d below %d", kmsg.NameForKey(key), v, e, cut)
				}
			}
		}
	}
}

// FuzzScan feeds arbitrary bodies to the scanners of the decodeCapped APIs:
// no input may panic, every body kmsg decodes must be accepted, and no
// estimate may be below the body's own size.
func FuzzScan(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, key := range []int16{listOffsetsKey, offsetCommitKey, joinGroupKey, syncGroupKey, createTopicsKey,
		txnOffsetCommitKey, describeConfigsKey} {
		for _, v := range []int16{0, 3, 5, 9} {
			if v > kmsg.RequestForKey(key).MaxVersion() {
				continue
			}
			req := realisticRequest(key, 8, rng)
			req.SetVersion(v)
			f.Add(key, v, req.AppendTo(nil))
		}
	}
	f.Fuzz(func(t *testing.T, key, version int16, body []byte) {
		keys := []int16{listOffsetsKey, offsetCommitKey, joinGroupKey, syncGroupKey, createTopicsKey,
			txnOffsetCommitKey, describeConfigsKey}
		key = keys[int(uint16(key))%len(keys)]
		req := kmsg.RequestForKey(key)
		version = int16(int(uint16(version)) % int(req.MaxVersion()+1))
		est, ok := sizeEstimate(key, version, body)
		if ok && est < int64(len(body)) {
			t.Fatalf("estimate %d below body %d", est, len(body))
		}
		req.SetVersion(version)
		if req.ReadFrom(append([]byte(nil), body...)) == nil && !ok {
			t.Fatalf("%s v%d: kmsg decodes %x but the scan refuses it", kmsg.NameForKey(key), version, body)
		}
	})
}
