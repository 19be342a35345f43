package handler

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/log"
)

// WriteTxnMarkers: v1-2
//
// Kafka 4 removed v0 (KIP-896); v1 is flexible.
//   - v2: each marker's TransactionVersion (KIP-1228); from
//     transaction.version 2 a marker must carry an epoch above the
//     producer's in the partition, else INVALID_PRODUCER_EPOCH (see
//     TxnCoordinator.WriteMarkerVersion); v1 markers are checked as
//     transactions v1 are.
//
// The transaction coordinator writes the markers of partitions led by its
// own node in-process, and sends this request to the leaders of the others
// on a cluster (txn_peers.go); it also serves tools such as
// kafka-transactions.sh abort (KIP-664), which end a hanging transaction by
// writing its marker directly. As
// KafkaApis.handleWriteTxnMarkersRequest, a partition not hosted here is
// UNKNOWN_TOPIC_OR_PARTITION.
func init() { register(27, 1, 2, handleWriteTxnMarkers) }

func handleWriteTxnMarkers(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.WriteTxnMarkersRequest)
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	resp.SetVersion(r.Version)
	// As KafkaApis: only brokers (CLUSTER_ACTION) write markers; a denial
	// fails every partition.
	denied := !env.authorizeCluster(req, acl.ClusterAction)
	for _, m := range r.Markers {
		sm := kmsg.NewWriteTxnMarkersResponseMarker()
		sm.ProducerID = m.ProducerID
		for _, rt := range m.Topics {
			st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition = p
				switch {
				case denied:
					sp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				case env.Partitions.Get(log.TopicPartition{Topic: rt.Topic, Partition: p}) == nil:
					sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				case env.Txn == nil:
					sp.ErrorCode = kerr.CoordinatorNotAvailable.Code
				default:
					tv := int8(0)
					if r.Version >= 2 {
						tv = m.TransactionVersion
					}
					sp.ErrorCode = ErrorCode(env.Txn.WriteMarkerVersion(rt.Topic, p, m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, tv))
				}
				env.Metrics.Error(req.Key, sp.ErrorCode)
				st.Partitions = append(st.Partitions, sp)
			}
			sm.Topics = append(sm.Topics, st)
		}
		resp.Markers = append(resp.Markers, sm)
	}
	return resp, nil
}
