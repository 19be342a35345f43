package proxy

import (
	"encoding/binary"
	"fmt"
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// canAnswerError reports whether errorResponse can build an error answer
// for key: the keys with per-partition errors handled below, or any
// response with a top-level ErrorCode.
func canAnswerError(key int16) bool {
	switch key {
	case 0, 1, 2, 3, 8, 9:
		return true
	}
	resp := kmsg.ResponseForKey(key)
	if resp == nil {
		return false
	}
	f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
	return f.IsValid() && f.Kind() == reflect.Int16
}

// errorResponse builds the frame (length, header, body) answering r with
// code, echoing the request's topics and partitions where the response
// carries per-partition errors, as Kafka's request handlers do.
func errorResponse(r *Request, code int16) ([]byte, error) {
	req := kmsg.RequestForKey(r.Key)
	if req == nil {
		return nil, fmt.Errorf("unknown api key %d", r.Key)
	}
	req.SetVersion(r.Version)
	if err := req.ReadFrom(r.Body); err != nil {
		return nil, fmt.Errorf("decoding %s v%d: %w", kmsg.NameForKey(r.Key), r.Version, err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(r.Version)
	switch q := req.(type) {
	case *kmsg.ProduceRequest:
		p := resp.(*kmsg.ProduceResponse)
		for _, t := range q.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, pt := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.BaseOffset = pt.Partition, code, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			p.Topics = append(p.Topics, rt)
		}
	case *kmsg.FetchRequest:
		p := resp.(*kmsg.FetchResponse)
		p.ErrorCode = code
		if r.Version < 7 {
			for _, t := range q.Topics {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				for _, pt := range t.Partitions {
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.HighWatermark = pt.Partition, code, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				p.Topics = append(p.Topics, rt)
			}
		}
	case *kmsg.ListOffsetsRequest:
		p := resp.(*kmsg.ListOffsetsResponse)
		for _, t := range q.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, pt := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.Offset, rp.Timestamp = pt.Partition, code, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			p.Topics = append(p.Topics, rt)
		}
	case *kmsg.MetadataRequest:
		p := resp.(*kmsg.MetadataResponse)
		for _, t := range q.Topics {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
			p.Topics = append(p.Topics, rt)
		}
	case *kmsg.OffsetCommitRequest:
		p := resp.(*kmsg.OffsetCommitResponse)
		for _, t := range q.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, pt := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = pt.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			p.Topics = append(p.Topics, rt)
		}
	case *kmsg.OffsetFetchRequest:
		p := resp.(*kmsg.OffsetFetchResponse)
		p.ErrorCode = code
		for _, g := range q.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, code
			p.Groups = append(p.Groups, rg)
		}
		if r.Version < 2 {
			for _, t := range q.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, pt := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.Offset = pt, code, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				p.Topics = append(p.Topics, rt)
			}
		}
	default:
		f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
		if !f.IsValid() || f.Kind() != reflect.Int16 {
			return nil, fmt.Errorf("no error response for %s", kmsg.NameForKey(r.Key))
		}
		f.SetInt(int64(code))
	}
	return encodeResponse(r.CorrelationID, resp), nil
}

// encodeResponse frames resp: length, correlation id, tagged fields when
// flexible (never for ApiVersions, whose response header is always v0, as
// Kafka's RequestHeader/ResponseHeader rules say), body.
func encodeResponse(corr int32, resp kmsg.Response) []byte {
	b := make([]byte, 8, 64)
	binary.BigEndian.PutUint32(b[4:], uint32(corr))
	if resp.IsFlexible() && resp.Key() != 18 {
		b = append(b, 0)
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}
