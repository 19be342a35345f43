package matrix_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/cascade-kafka/cascade/matrix"
	"github.com/cascade-kafka/cascade/matrix/cascadecluster"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// checkClusterActionRefused: a principal without CLUSTER_ACTION on the
// cluster, authenticated on the controller listener by a certificate of
// the cluster's CA, is refused the brokers' own controller APIs with
// CLUSTER_AUTHORIZATION_FAILED (as ControllerApis: BrokerRegistration,
// BrokerHeartbeat, AlterPartition, an Envelope that claims to carry the
// super user's request, and KRaft's Vote, BeginQuorumEpoch, EndQuorumEpoch
// and FetchSnapshot), and a replica Fetch on the CLIENT listener from
// noACLUser is TOPIC_AUTHORIZATION_FAILED on every partition (as
// KafkaApis.handleFetchRequest). Cascade's quorum runs over its own frames,
// which have no error answer: a node closes the intruder's connection and
// logs the refusal.
func checkClusterActionRefused(t *testing.T, ctx context.Context, sc *secureCluster, target string) {
	id := sc.c.BrokerIDs()[0]
	send := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		conn := sc.dialIntruder(t, id)
		defer conn.Close()
		resp, err := roundTrip(conn, req)
		if err != nil {
			t.Fatalf("%s as intruder: %v", kmsg.NameForKey(req.Key()), err)
		}
		return resp
	}
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.SetVersion(1)
	hb.BrokerID, hb.BrokerEpoch = int32(id), 1
	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.SetVersion(4)
	reg.BrokerID, reg.ClusterID, reg.IncarnationID = 99, "intruder", [16]byte{1}
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "CLIENT", "127.0.0.1", 1
	reg.Listeners = append(reg.Listeners, l)
	ap := kmsg.NewPtrAlterPartitionRequest()
	ap.SetVersion(3)
	ap.BrokerID, ap.BrokerEpoch = int32(id), 1
	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "intruder-topic", 1, 1
	ct.Topics = append(ct.Topics, rt)
	who := kmsg.NewDefaultPrincipalData()
	who.Type, who.Name = "User", adminUser
	env := kmsg.NewPtrEnvelopeRequest()
	env.RequestData = appendRequest(nil, ct, 7)[4:]
	env.RequestPrincipal, env.ClientHostAddress = who.AppendTo(nil), []byte{127, 0, 0, 1}
	vote := kmsg.NewPtrVoteRequest()
	vote.SetVersion(1)
	begin := kmsg.NewPtrBeginQuorumEpochRequest()
	begin.SetVersion(1)
	end := kmsg.NewPtrEndQuorumEpochRequest()
	end.SetVersion(1)
	snap := kmsg.NewPtrFetchSnapshotRequest()
	snap.SetVersion(1)
	reqs := []kmsg.Request{hb, reg, ap, env, vote, begin, end, snap}
	for _, req := range reqs {
		// Each of these responses has a top-level ErrorCode.
		code := int16(reflect.ValueOf(send(req)).Elem().FieldByName("ErrorCode").Int())
		if code != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("%s from a principal without CLUSTER_ACTION: %v, want CLUSTER_AUTHORIZATION_FAILED", kmsg.NameForKey(req.Key()), kerr.ErrorForCode(code))
		}
	}
	if target == matrix.TargetCascade {
		checkQuorumFrameRefused(t, ctx, sc, id)
	}
	checkReplicaFetchRefused(t, ctx, sc, id)
}

// dialIntruder opens a TLS connection to node id's controller listener
// with the intruder's certificate.
func (sc *secureCluster) dialIntruder(t *testing.T, id int) net.Conn {
	t.Helper()
	conn, err := tls.Dial("tcp", sc.c.ControllerAddr(id), &tls.Config{RootCAs: sc.ca.Pool(),
		Certificates: []tls.Certificate{sc.intruder}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// checkQuorumFrameRefused sends a Cascade quorum frame as the intruder and
// waits for the node's log to say it refused it for CLUSTER_ACTION.
func checkQuorumFrameRefused(t *testing.T, ctx context.Context, sc *secureCluster, id int) {
	cc := sc.c.(*cascadecluster.Cluster)
	conn := sc.dialIntruder(t, id)
	defer conn.Close()
	// A frame of the quorum's API key (32700), ten bytes long.
	if _, err := conn.Write([]byte{0, 0, 0, 10, 0x7f, 0xbc, 0, 0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("the controller answered a quorum frame from a principal without CLUSTER_ACTION")
	}
	err := cluster.Poll(ctx, 100*time.Millisecond, func() error {
		log, err := os.ReadFile(cc.Node(id).LogPath())
		if err != nil {
			return err
		}
		if !strings.Contains(string(log), "refused quorum traffic from a principal without CLUSTER_ACTION") ||
			!strings.Contains(string(log), "principal=User:intruder") {
			return errors.New("no log line of the refused quorum frame")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkReplicaFetchRefused: a Fetch with a replica id from noACLUser, at
// v12 (topics by name).
func checkReplicaFetchRefused(t *testing.T, ctx context.Context, sc *secureCluster, id int) {
	v := kversion.Stable()
	v.SetMaxKeyVersion(1, 12)
	cl := sc.clientOf(t, noACLUser, noACLPassword, []int{id}, kgo.MaxVersions(v))
	f := kmsg.NewPtrFetchRequest()
	f.SetVersion(12)
	f.ReplicaID, f.MaxWaitMillis, f.MaxBytes = int32(id%3+1), 10, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "secure-granted"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	resp, err := f.RequestWith(ctx, cl.Broker(id))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("replica Fetch answer %+v", resp)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("replica Fetch from %s: %v, want TOPIC_AUTHORIZATION_FAILED", noACLUser, kerr.ErrorForCode(code))
	}
}

// appendRequest appends req as a size-prefixed frame at version, with
// correlation id 1 and client id "test".
func appendRequest(dst []byte, req kmsg.Request, version int16) []byte {
	req.SetVersion(version)
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, byte(req.Key()>>8), byte(req.Key()), byte(version>>8), byte(version), 0, 0, 0, 1, 0, 4, 't', 'e', 's', 't')
	if req.IsFlexible() {
		dst = append(dst, 0)
	}
	dst = req.AppendTo(dst)
	n := len(dst) - start - 4
	dst[start], dst[start+1], dst[start+2], dst[start+3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return dst
}

// roundTrip writes req on conn and reads its answer.
func roundTrip(conn net.Conn, req kmsg.Request) (kmsg.Response, error) {
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := conn.Write(appendRequest(nil, req, req.GetVersion())); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, err
	}
	n := int(size[0])<<24 | int(size[1])<<16 | int(size[2])<<8 | int(size[3])
	if n < 5 || n > 1<<20 {
		return nil, errors.New("bad response size")
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return nil, err
	}
	body := buf[4:]
	if req.IsFlexible() && req.Key() != 18 {
		body = body[1:] // an empty tag section
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	return resp, resp.ReadFrom(body)
}
