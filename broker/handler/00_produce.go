package handler

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/metadata"
	"github.com/cascade-kafka/cascade/broker/record"
)

// Produce: v0-13
//
// Kafka 4 advertises v0-13 but refuses v0-2: librdkafka needs v0 in the
// advertised range to pick message format v2 (KAFKA-18659), while KIP-896
// removed v0-2 themselves. Kafka 4.4's request parser throws
// UnsupportedVersionException for them and the network processor closes
// the connection; Cascade does the same.
//   - v3: TransactionalID; record batches must be magic v2, exactly one per
//     partition (ProduceRequest.validateRecords)
//   - v5: LogStartOffset
//   - v7: zstd allowed (KIP-110)
//   - v8: ErrorRecords, ErrorMessage (KIP-467)
//   - v9: flexible
//   - v10-11: CurrentLeader / NodeEndpoints (KIP-951; no leader moves here)
//   - v12: transactions v2 may add partitions implicitly (KIP-890)
//   - v13: topics by id instead of name (KIP-516); an id this broker does
//     not know answers UNKNOWN_TOPIC_ID for each of its partitions, as
//     KafkaApis.handleProduceRequest
//
// acks=0 gets no response; if any partition failed the connection is
// closed instead, as Kafka does so that the producer notices.
func init() { register(0, 0, 13, handleProduce) }

// clientIDAdmin is AdminUtils.ADMIN_CLIENT_ID: only it may write internal
// topics directly.
const clientIDAdmin = "__admin_client"

func handleProduce(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.ProduceRequest)
	if r.Version < 3 {
		return nil, fmt.Errorf("handler: produce v%d is not supported (KIP-896); closing as Kafka does", r.Version)
	}
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	resp.SetVersion(r.Version)
	validAcks := r.Acks == 0 || r.Acks == 1 || r.Acks == -1
	failed := false
	img := env.Meta.Image()
	var leaders map[int32]bool // KIP-951: nodes named as current leaders
	var pending []pendingAck   // acks=all partitions waiting for the ISR
	// As KafkaApis.handleProduceRequest: a transactional producer needs
	// WRITE on its transactional id, or the whole request fails.
	txnDenied := r.TransactionID != nil && !env.authorize(req, acl.Write, acl.TransactionalID, *r.TransactionID)
	for _, rt := range r.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		topic, known := rt.Topic, true
		if r.Version >= 13 {
			// From v13 the request names topics by id only.
			t, ok := img.TopicByID(metadata.UUID(rt.TopicID))
			if ok {
				topic = t.Name
			}
			known = ok
		}
		// Unknown ids first, then WRITE on the topic, then existence.
		allowed := known && env.authorizeTopic(req, acl.Write, topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			code, msg := kerr.UnknownTopicID.Code, ""
			switch {
			case txnDenied:
				code = kerr.TransactionalIDAuthorizationFailed.Code
			case known && !allowed:
				code = kerr.TopicAuthorizationFailed.Code
			case known:
				var required int64
				code, msg, required = produceOne(env, req, r, topic, rp.Records, rp.Partition, validAcks, &sp)
				if code == 0 && required >= 0 {
					pending = append(pending, pendingAck{tp: log.TopicPartition{Topic: topic, Partition: rp.Partition},
						required: required, topic: len(resp.Topics), part: len(st.Partitions)})
				}
			}
			sp.ErrorCode = code
			if code == kerr.NotLeaderForPartition.Code && r.Version >= 10 {
				if id, epoch, ok := env.currentLeader(topic, rp.Partition); ok {
					sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = id, epoch
					if leaders == nil {
						leaders = map[int32]bool{}
					}
					leaders[id] = true
				}
			}
			if code != 0 {
				failed = true
				env.Metrics.Error(req.Key, code)
				if r.Version >= 8 && msg != "" {
					sp.ErrorMessage = &msg
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(pending) > 0 {
		// The records are in the log: the request's bytes are not
		// needed while the ISR catches up (Kafka's
		// clearPartitionRecords before the DelayedProduce).
		if req.consumed != nil {
			req.consumed()
		}
		if err := env.awaitAcks(ctx, resp, r.TimeoutMillis, pending); err != nil {
			return nil, err
		}
	}
	for _, b := range env.brokers() {
		if leaders[b.ID] {
			pb := kmsg.NewProduceResponseBroker()
			pb.NodeID, pb.Host, pb.Port = b.ID, b.Host, b.Port
			if b.Rack != "" {
				rack := b.Rack
				pb.Rack = &rack
			}
			resp.Brokers = append(resp.Brokers, pb)
		}
	}
	if r.Acks == 0 {
		if failed {
			return nil, errors.New("handler: produce with acks=0 failed; closing so the producer notices")
		}
		return nil, nil
	}
	return resp, nil
}

// produceOne appends one partition's records and fills sp; it returns the
// error code and, where Kafka sends one, the error message.
func produceOne(env *Env, req *Request, r *kmsg.ProduceRequest, topic string, records []byte, part int32,
	validAcks bool, sp *kmsg.ProduceResponseTopicPartition) (int16, string, int64) {
	tp := log.TopicPartition{Topic: topic, Partition: part}
	replicated := env.replicated(tp)
	code, msg, info := appendOne(env, req, r, tp, records, validAcks, replicated, sp)
	if code != 0 || !replicated {
		return code, msg, -1
	}
	env.Replication.Appended(tp)
	if r.Acks != -1 {
		return 0, "", -1
	}
	// As Kafka's DelayedProduce: acks=all waits for the high watermark
	// to pass the batch's last offset.
	return 0, "", info.LastOffset + 1
}

// appendOne checks and appends one partition's records to the local log.
func appendOne(env *Env, req *Request, r *kmsg.ProduceRequest, tp log.TopicPartition, records []byte,
	validAcks, replicated bool, sp *kmsg.ProduceResponseTopicPartition) (int16, string, log.AppendInfo) {
	topic, part := tp.Topic, tp.Partition
	var info log.AppendInfo
	var err error
	// KafkaApis checks that the partition exists and validates the
	// records; ReplicaManager.appendRecords then checks acks, and
	// appendToLocalLog refuses internal topics.
	p := env.Partitions.Get(tp)
	if code := env.notLeaderCode(topic, part, p); code != 0 {
		return code, "", info
	}
	if code, _ := validateProduceRecords(r.Version, records); code != 0 {
		// KafkaApis answers these with a bare PartitionResponse: the
		// exception's message is not sent.
		return code, "", info
	}
	if !validAcks {
		return kerr.InvalidRequiredAcks.Code, "", info
	}
	if isInternalTopic(topic) && req.ClientID != clientIDAdmin {
		// Kafka's ReplicaManager builds an InvalidTopicException with a
		// message but sends no message (hasCustomErrorMessage false).
		return kerr.InvalidTopicException.Code, "", info
	}
	// As Partition.appendRecordsToLeader: acks=all needs the effective
	// min.insync.replicas in the ISR, which Partition.effectiveMinIsr caps
	// at the replica count. A partition of one replica, its leader alone
	// in the ISR, therefore takes acks=all whatever min.insync.replicas
	// says.
	if replicated {
		if err := env.Replication.CheckAppend(tp, r.Acks); err != nil {
			return ErrorCode(err), "", info
		}
	}
	release, code := txnAppendGuard(env, r.TransactionID, r.TimeoutMillis, r.Version, topic, part, records)
	if code != 0 {
		return code, "", info
	}
	info, err = p.Append(records)
	release()
	if err != nil {
		code := ErrorCode(err)
		if !noLogStartOnError[code] {
			// As ReplicaManager.appendToLocalLog: every other
			// failure answers the partition's log start offset
			// (processFailedRecord).
			sp.LogStartOffset = p.LogStartOffset()
		}
		if code == kerr.UnknownServerError.Code {
			env.logger().Error("produce append failed", "topic", topic, "partition", part, "err", err)
		}
		// As Kafka's ReplicaManager: a RecordValidationException
		// (INVALID_RECORD, INVALID_TIMESTAMP) carries its message and
		// the index and message of each refused record (v8+) to the
		// producer; a CorruptRecordException (CRC mismatch) does not.
		msg := ""
		if code == kerr.InvalidRecord.Code {
			msg = err.Error()
		}
		if verr := (*record.ValidationError)(nil); errors.As(err, &verr) {
			msg = verr.Error()
			for _, re := range verr.Records {
				er := kmsg.NewProduceResponseTopicPartitionErrorRecord()
				er.RelativeOffset, er.ErrorMessage = re.Index, &re.Message
				sp.ErrorRecords = append(sp.ErrorRecords, er)
			}
		}
		return code, msg, info
	}
	sp.BaseOffset = info.FirstOffset
	sp.LogAppendTime = info.LogAppendTime
	sp.LogStartOffset = info.LogStartOffset
	return 0, "", info
}

// noLogStartOnError are the errors ReplicaManager.appendToLocalLog answers
// with LogAppendInfo.UNKNOWN_LOG_APPEND_INFO, log start offset -1.
var noLogStartOnError = map[int16]bool{
	kerr.UnknownTopicOrPartition.Code: true,
	kerr.NotLeaderForPartition.Code:   true,
	kerr.MessageTooLarge.Code:         true,
	kerr.RecordListTooLarge.Code:      true,
	kerr.CorruptMessage.Code:          true,
	kerr.KafkaStorageError.Code:       true,
}

// Record batch layout offsets (DefaultRecordBatch).
const (
	batchLengthOffset    = 8
	batchMagicOffset     = 16
	batchAttrOffset      = 21
	batchLogOverhead     = 12 // base offset + length
	batchHeaderSize      = 61 // RECORD_BATCH_OVERHEAD
	compressionZstd      = 4
	compressionCodecMask = 7
)

// validateProduceRecords is ProduceRequest.validateRecords: from v3 exactly
// one magic-v2 batch per partition, and no zstd before v7. Everything else
// (CRC, header fields, records) is the log's to check.
func validateProduceRecords(version int16, recs []byte) (int16, string) {
	if len(recs) < batchLogOverhead {
		return kerr.InvalidRecord.Code, "Produce requests with version " + strconv.Itoa(int(version)) + " must have at least one record batch per partition"
	}
	n := int32(binary.BigEndian.Uint32(recs[batchLengthOffset:]))
	if n < batchHeaderSize-batchLogOverhead {
		return kerr.CorruptMessage.Code, "Record batch size " + strconv.Itoa(int(n)) + " is smaller than the minimum allowed overhead"
	}
	if int64(n) > int64(len(recs)-batchLogOverhead) {
		// A truncated batch is no batch to MemoryRecords' iterator.
		return kerr.InvalidRecord.Code, "Produce requests with version " + strconv.Itoa(int(version)) + " must have at least one record batch per partition"
	}
	if recs[batchMagicOffset] != 2 {
		return kerr.InvalidRecord.Code, "Produce requests with version " + strconv.Itoa(int(version)) + " are only allowed to contain record batches with magic version 2"
	}
	attrs := binary.BigEndian.Uint16(recs[batchAttrOffset:])
	if version < 7 && attrs&compressionCodecMask == compressionZstd {
		return kerr.UnsupportedCompressionType.Code, "Produce requests with version " + strconv.Itoa(int(version)) + " are not allowed to use ZStandard compression"
	}
	if int(n)+batchLogOverhead != len(recs) {
		return kerr.InvalidRecord.Code, "Produce requests with version " + strconv.Itoa(int(version)) + " are only allowed to contain exactly one record batch per partition"
	}
	return 0, ""
}
