package broker_test

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The conformance tests of this file hold the versions Kafka 4.4 added to
// the APIs Cascade implements (ApiVersions v5, TxnOffsetCommit v6,
// DescribeLogDirs v5, DeleteGroups v3) against Apache Kafka 4.4.

// identity returns the cluster id and node id rc's broker reports in
// Metadata.
func identity(t *testing.T, rc *rawConn) (string, int32) {
	t.Helper()
	m := rc.do(metadataReq(12, false)).(*kmsg.MetadataResponse)
	if m.ClusterID == nil || len(m.Brokers) != 1 {
		t.Fatalf("metadata: cluster id %v, %d brokers", m.ClusterID, len(m.Brokers))
	}
	return *m.ClusterID, m.Brokers[0].NodeID
}

func apiVersionsV5(cluster *string, node int32) *kmsg.ApiVersionsRequest {
	r := kmsg.NewPtrApiVersionsRequest()
	r.SetVersion(5)
	r.ClientSoftwareName, r.ClientSoftwareVersion = "conformance", "1"
	r.ClusterID, r.NodeID = cluster, node
	return r
}

// TestConformanceApiVersionsV5 compares ApiVersions v5 (KIP-1242): the
// ClusterId and NodeId a client names are checked against the broker's own,
// each broker being asked with its own ids. A set ClusterId without a NodeId
// or the reverse is INVALID_REQUEST; a wrong one REBOOTSTRAP_REQUIRED; both
// errors list no APIs. Null and -1 (bootstrapping) and the right ids are
// answered in full.
func TestConformanceApiVersionsV5(t *testing.T) {
	p := newPair(t)
	kc, kn := identity(t, p.kafka)
	cc, cn := identity(t, p.cascade)
	s := kmsg.StringPtr

	full := func(name string, kreq, creq *kmsg.ApiVersionsRequest) {
		t.Helper()
		k := p.kafka.do(kreq).(*kmsg.ApiVersionsResponse)
		c := p.cascade.do(creq).(*kmsg.ApiVersionsResponse)
		if k.ErrorCode != 0 || c.ErrorCode != 0 {
			t.Errorf("%s: error codes kafka %d cascade %d", name, k.ErrorCode, c.ErrorCode)
		}
		if len(k.ApiKeys) == 0 || len(c.ApiKeys) == 0 || len(k.SupportedFeatures) == 0 || len(c.SupportedFeatures) == 0 {
			t.Errorf("%s: kafka lists %d APIs %d features, cascade %d APIs %d features", name,
				len(k.ApiKeys), len(k.SupportedFeatures), len(c.ApiKeys), len(c.SupportedFeatures))
		}
	}
	full("bootstrapping", apiVersionsV5(nil, -1), apiVersionsV5(nil, -1))
	full("right ids", apiVersionsV5(s(kc), kn), apiVersionsV5(s(cc), cn))

	for _, tc := range []struct {
		name       string
		kreq, creq *kmsg.ApiVersionsRequest
		want       int16
	}{
		{"wrong cluster id", apiVersionsV5(s(kc+"x"), kn), apiVersionsV5(s(cc+"x"), cn), kerr.RebootstrapRequired.Code},
		{"wrong node id", apiVersionsV5(s(kc), kn+1), apiVersionsV5(s(cc), cn+1), kerr.RebootstrapRequired.Code},
		{"both wrong", apiVersionsV5(s("other"), 77), apiVersionsV5(s("other"), 77), kerr.RebootstrapRequired.Code},
		{"empty cluster id", apiVersionsV5(s(""), kn), apiVersionsV5(s(""), cn), kerr.RebootstrapRequired.Code},
		{"cluster id only", apiVersionsV5(s(kc), -1), apiVersionsV5(s(cc), -1), kerr.InvalidRequest.Code},
		{"wrong cluster id only", apiVersionsV5(s("other"), -1), apiVersionsV5(s("other"), -1), kerr.InvalidRequest.Code},
		{"node id only", apiVersionsV5(nil, kn), apiVersionsV5(nil, cn), kerr.InvalidRequest.Code},
		{"wrong node id only", apiVersionsV5(nil, 77), apiVersionsV5(nil, 77), kerr.InvalidRequest.Code},
	} {
		k, c := p.compareByID(t, tc.name, tc.kreq, tc.creq)
		if code := k.(*kmsg.ApiVersionsResponse).ErrorCode; code != tc.want {
			t.Errorf("%s: kafka answered %v, the test expects %v", tc.name, kerr.ErrorForCode(code), kerr.ErrorForCode(tc.want))
		}
		if code := c.(*kmsg.ApiVersionsResponse).ErrorCode; code != tc.want {
			t.Errorf("%s: cascade answered %v", tc.name, kerr.ErrorForCode(code))
		}
	}
	// A bad software name with the right ids is INVALID_REQUEST; with
	// wrong ids too (isValid is checked before the ids).
	bad := func(cluster string, node int32) *kmsg.ApiVersionsRequest {
		r := apiVersionsV5(kmsg.StringPtr(cluster), node)
		r.ClientSoftwareName = "-bad-"
		return r
	}
	p.compareByID(t, "bad software name", bad(kc, kn), bad(cc, cn))
	p.check(t, "bad software name, wrong ids", bad("other", 77))
	// v4 carries no ids: nothing to check.
	v4 := apiVersionsV5(nil, -1)
	v4.SetVersion(4)
	full("v4", v4, v4)
}

// TestConformanceDeleteGroupsV3 compares DeleteGroups v3 (a per-group
// ErrorMessage) with v2 for an unknown group, an invalid group id, an empty
// group holding offsets, and a group with a member: as Kafka's
// GroupCoordinatorService, none of these errors carries a message.
func TestConformanceDeleteGroupsV3(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "dg3")
	group := conformanceTopic(t, "dg3g")
	p.createBoth(t, topic, 1)
	p.findGroupCoordinator(t, group)
	del := func(v int16, groups ...string) *kmsg.DeleteGroupsRequest {
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.SetVersion(v)
		r.Groups = groups
		return r
	}
	for _, v := range []int16{2, 3} {
		vg := fmt.Sprintf("%s-%d", group, v)
		p.check(t, "commit", offsetCommitReq(9, vg+"-empty", topic, [16]byte{}, 0))
		joinClassic(t, p.kafka, vg+"-busy", topic, 1)
		joinClassic(t, p.cascade, vg+"-busy", topic, 1)
		bothSorted(t, p, fmt.Sprintf("v%d unknown, invalid, empty and busy groups", v), del(v, vg+"-none", "", vg+"-empty", vg+"-busy"))
		bothSorted(t, p, fmt.Sprintf("v%d deleted group again", v), del(v, vg+"-empty"))
		bothSorted(t, p, fmt.Sprintf("v%d no groups", v), del(v))
	}
}

// bothSorted compares the answers to a DeleteGroups request group by group:
// Kafka orders the results by where it found each error (invalid ids first,
// then per coordinator partition), which clients do not rely on; they look
// each group up by id.
func bothSorted(t *testing.T, p *pair, name string, req *kmsg.DeleteGroupsRequest) {
	t.Helper()
	k, c := p.both(req)
	for _, r := range []kmsg.Response{k, c} {
		gs := r.(*kmsg.DeleteGroupsResponse).Groups
		sort.Slice(gs, func(i, j int) bool { return gs[i].Group < gs[j].Group })
	}
	for _, d := range diffResponses(k, c) {
		t.Errorf("%s: %s", name, d)
	}
}

// TestConformanceDescribeLogDirsV5 compares DescribeLogDirs v5 (KIP-1066:
// IsCordoned) with v4. The paths and volume sizes of the two brokers
// differ, so the dirs are compared on their errors, IsCordoned, the
// presence of the sizes, and the partitions of one topic.
func TestConformanceDescribeLogDirsV5(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "dld5")
	p.createBoth(t, topic, 2)
	p.both(produceReq(9, -1, topic, 0, confBatch(t, -1, -1, -1, "a", "b")))
	for _, v := range []int16{4, 5} {
		for _, all := range []bool{false, true} {
			r := kmsg.NewPtrDescribeLogDirsRequest()
			r.SetVersion(v)
			if !all {
				rt := kmsg.NewDescribeLogDirsRequestTopic()
				rt.Topic, rt.Partitions = topic, []int32{0, 1, 7}
				r.Topics = append(r.Topics, rt)
			}
			name := fmt.Sprintf("v%d all=%v", v, all)
			k, c := p.both(r)
			kr, cr := k.(*kmsg.DescribeLogDirsResponse), c.(*kmsg.DescribeLogDirsResponse)
			if kr.ErrorCode != cr.ErrorCode || len(kr.Dirs) != len(cr.Dirs) {
				t.Fatalf("%s: kafka error %d, %d dirs; cascade error %d, %d dirs", name, kr.ErrorCode, len(kr.Dirs), cr.ErrorCode, len(cr.Dirs))
			}
			for i := range kr.Dirs {
				kd, cd := kr.Dirs[i], cr.Dirs[i]
				if kd.ErrorCode != cd.ErrorCode || kd.IsCordoned != cd.IsCordoned {
					t.Errorf("%s dir %d: kafka error %d cordoned %v, cascade error %d cordoned %v", name, i, kd.ErrorCode, kd.IsCordoned, cd.ErrorCode, cd.IsCordoned)
				}
				if (kd.TotalBytes > 0) != (cd.TotalBytes > 0) || (kd.UsableBytes > 0) != (cd.UsableBytes > 0) {
					t.Errorf("%s dir %d: kafka sizes %d/%d, cascade %d/%d", name, i, kd.TotalBytes, kd.UsableBytes, cd.TotalBytes, cd.UsableBytes)
				}
				of := func(d kmsg.DescribeLogDirsResponseDir) []kmsg.DescribeLogDirsResponseDirTopicPartition {
					for _, dt := range d.Topics {
						if dt.Topic == topic {
							return dt.Partitions
						}
					}
					return nil
				}
				kp, cp := of(kd), of(cd)
				if len(kp) != len(cp) {
					t.Errorf("%s dir %d: kafka lists %d partitions of the topic, cascade %d", name, i, len(kp), len(cp))
					continue
				}
				for j := range kp {
					if kp[j].Partition != cp[j].Partition || kp[j].Size != cp[j].Size || kp[j].OffsetLag != cp[j].OffsetLag || kp[j].IsFuture != cp[j].IsFuture {
						t.Errorf("%s dir %d: kafka %+v, cascade %+v", name, i, kp[j], cp[j])
					}
				}
			}
		}
	}
}

// txnProducer is one broker's transactional producer.
type txnProducer struct {
	id    int64
	epoch int16
}

// initTxnProducer finds txnID's coordinator on rc and initialises its
// producer.
func initTxnProducer(t *testing.T, rc *rawConn, txnID string) txnProducer {
	t.Helper()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(3)
	fc.CoordinatorKey, fc.CoordinatorType = txnID, 1
	r := kmsg.NewPtrInitProducerIDRequest()
	r.SetVersion(5)
	r.TransactionalID = kmsg.StringPtr(txnID)
	r.TransactionTimeoutMillis = 60000
	r.ProducerID, r.ProducerEpoch = -1, -1
	for i := 0; ; i++ {
		code := rc.do(fc).(*kmsg.FindCoordinatorResponse).ErrorCode
		var resp *kmsg.InitProducerIDResponse
		if code == 0 {
			resp = rc.do(r).(*kmsg.InitProducerIDResponse)
			code = resp.ErrorCode
		}
		err := kerr.ErrorForCode(code)
		switch {
		case err == nil:
			return txnProducer{resp.ProducerID, resp.ProducerEpoch}
		case kerr.IsRetriable(err) && i < 100:
			time.Sleep(100 * time.Millisecond)
		default:
			t.Fatalf("init transactional producer: %v", err)
		}
	}
}

// txnCommitReq commits offset 3 of parts of a topic, named by id from v6.
func txnCommitReq(v int16, txnID string, pr txnProducer, group string, gen int32, member, topic string, id [16]byte, parts ...int32) *kmsg.TxnOffsetCommitRequest {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.SetVersion(v)
	r.TransactionalID, r.Group = txnID, group
	r.ProducerID, r.ProducerEpoch = pr.id, pr.epoch
	r.Generation, r.MemberID = gen, member
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	if v >= 6 {
		rt.TopicID = id
	} else {
		rt.Topic = topic
	}
	for _, part := range parts {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = part, 3, -1
		rp.Metadata = kmsg.StringPtr("m")
		rt.Partitions = append(rt.Partitions, rp)
	}
	r.Topics = append(r.Topics, rt)
	return r
}

// TestConformanceTxnOffsetCommitV6 compares TxnOffsetCommit v6 (KIP-1319:
// topics by id; GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH where v5 answers
// ILLEGAL_GENERATION) with v5: unknown topic ids and partitions are refused
// before the transaction and the group are checked, and the offsets a
// committed transaction wrote by id are read back by name.
func TestConformanceTxnOffsetCommitV6(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "toc6")
	group := conformanceTopic(t, "toc6g")
	txnID := conformanceTopic(t, "toc6t")
	p.createBoth(t, topic, 2)
	p.findGroupCoordinator(t, group)
	kid, cid := p.topicIDs(t, topic)
	kp, cp := initTxnProducer(t, p.kafka, txnID), initTxnProducer(t, p.cascade, txnID)

	// What is refused before the transaction is looked at: an unknown
	// producer changes nothing.
	nobody := txnProducer{id: 999_999, epoch: 0}
	p.check(t, "v6 unknown topic id", txnCommitReq(6, txnID, nobody, group, -1, "", "", [16]byte{7, 7, 7}, 0, 1))
	p.check(t, "v6 zero topic id", txnCommitReq(6, txnID, nobody, group, -1, "", "", [16]byte{}, 0))
	p.check(t, "v5 unknown topic", txnCommitReq(5, txnID, nobody, group, -1, "", topic+"-absent", [16]byte{}, 0))
	p.compareByID(t, "v6 unknown partition",
		txnCommitReq(6, txnID, nobody, group, -1, "", "", kid, 9), txnCommitReq(6, txnID, nobody, group, -1, "", "", cid, 9))
	p.compareByID(t, "v6 unknown partition, unknown producer",
		txnCommitReq(6, txnID, nobody, group, -1, "", "", kid, 9, 0), txnCommitReq(6, txnID, nobody, group, -1, "", "", cid, 9, 0))

	// Group errors: a generation for a group that does not exist.
	for _, v := range []int16{5, 6} {
		p.compareByID(t, fmt.Sprintf("v%d generation of an unknown group", v),
			txnCommitReq(v, txnID, kp, group+"-none", 4, "m", topic, kid, 0),
			txnCommitReq(v, txnID, cp, group+"-none", 4, "m", topic, cid, 0))
	}
	// A consumer group member naming an epoch newer than its own.
	cg := group + "-cg"
	member := clientMemberID(t)
	epochs := map[string]int32{}
	for who, rc := range map[string]*rawConn{"kafka": p.kafka, "cascade": p.cascade} {
		r := rc.do(consumerHeartbeatReq(cg, member, nil, topic)).(*kmsg.ConsumerGroupHeartbeatResponse)
		if r.ErrorCode != 0 {
			t.Fatalf("%s: ConsumerGroupHeartbeat: %v", who, kerr.ErrorForCode(r.ErrorCode))
		}
		epochs[who] = r.MemberEpoch
	}
	if epochs["kafka"] != epochs["cascade"] {
		t.Fatalf("member epochs: %v", epochs)
	}
	for _, v := range []int16{5, 6} {
		p.compareByID(t, fmt.Sprintf("v%d newer member epoch", v),
			txnCommitReq(v, txnID, kp, cg, epochs["kafka"]+1, member, topic, kid, 0),
			txnCommitReq(v, txnID, cp, cg, epochs["cascade"]+1, member, topic, cid, 0))
		p.compareByID(t, fmt.Sprintf("v%d unknown member", v),
			txnCommitReq(v, txnID, kp, cg, epochs["kafka"], "nobody", topic, kid, 0),
			txnCommitReq(v, txnID, cp, cg, epochs["cascade"], "nobody", topic, cid, 0))
	}

	// A commit by id next to an unknown id and partition, then the
	// transaction commits and the offsets are read back by name.
	withUnknown := func(pr txnProducer, id [16]byte) *kmsg.TxnOffsetCommitRequest {
		r := txnCommitReq(6, txnID, pr, group, -1, "", "", [16]byte{7, 7, 7}, 0)
		r.Topics = append(r.Topics, txnCommitReq(6, txnID, pr, group, -1, "", "", id, 0, 5, 1).Topics[0])
		return r
	}
	p.compareByID(t, "v6 commit by id", withUnknown(kp, kid), withUnknown(cp, cid))
	end := func(pr txnProducer) *kmsg.EndTxnRequest {
		r := kmsg.NewPtrEndTxnRequest()
		r.SetVersion(5)
		r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit = txnID, pr.id, pr.epoch, true
		return r
	}
	p.compareByID(t, "end transaction", end(kp), end(cp))
	fetch := offsetFetchReq(9, group, topic, [16]byte{}, []int32{0, 1})
	fetch.RequireStable = true
	for who, rc := range map[string]*rawConn{"kafka": p.kafka, "cascade": p.cascade} {
		for i := 0; ; i++ {
			g := rc.do(fetch).(*kmsg.OffsetFetchResponse).Groups[0]
			if g.ErrorCode == 0 && len(g.Topics) == 1 && g.Topics[0].Partitions[0].ErrorCode == 0 && g.Topics[0].Partitions[0].Offset == 3 {
				break
			}
			if i > 100 {
				t.Fatalf("%s: offsets not committed: %+v", who, g)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	p.check(t, "offsets read back", fetch)
}
