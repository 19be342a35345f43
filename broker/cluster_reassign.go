package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/controller"
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// Partition reassignment (KIP-455), forwarded by brokers to the active
// controller as Kafka's KafkaApis does and answered by package controller:
//
//   - AlterPartitionReassignments: v0-1, as Kafka 4.4 (flexible from v0).
//     v1: AllowReplicationFactorChange (KIP-860), echoed in the answer; v0
//     always allows a change.
//   - ListPartitionReassignments: v0, as Kafka 4.4.
//
// A broker assigned a new replica opens its log and follows the leader as
// the image's replica sets say (specsFor, replication.Manager.Apply); a
// replica removed from the assignment is deleted then, and only then.

// alterPartitionReassignments answers AlterPartitionReassignments as
// ControllerApis and ReplicationControlManager.alterPartitionReassignments:
// each partition in request order with its own error; a node that is not
// the active controller, or a request that timed out, answers every
// partition and the top level with that error, as
// AlterPartitionReassignmentsRequest.getErrorResponse.
func (n *clusterNode) alterPartitionReassignments(ctx context.Context, r *kmsg.AlterPartitionAssignmentsRequest) *kmsg.AlterPartitionAssignmentsResponse {
	resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	allow := r.Version < 1 || r.AllowReplicationFactorChange
	resp.AllowReplicationFactorChange = allow
	topics := make([]controller.ReassignTopic, 0, len(r.Topics))
	for _, t := range r.Topics {
		rt := controller.ReassignTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, controller.ReassignPartition{Partition: p.Partition, Replicas: p.Replicas})
		}
		topics = append(topics, rt)
	}
	ctx, cancel := requestContext(ctx, r.TimeoutMillis)
	defer cancel()
	var results []controller.ReassignResult
	err := n.active.do(ctx, func(c *controller.Controller, img *metadata.Image, _ time.Time, _ int64) ([]metadata.Record, error) {
		recs, res, err := c.AlterPartitionReassignments(img, topics, allow)
		results = res
		return recs, err
	})
	if err != nil {
		code, msg := requestCode(err)
		alterReassignmentsFailed(r, resp, code, msg)
		return resp
	}
	for _, t := range r.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for range t.Partitions {
			res := results[0]
			results = results[1:]
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = res.Partition
			rp.ErrorCode, rp.ErrorMessage = apiCode(res.Err)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// requestCode is apiCode with a lapsed request deadline answered
// REQUEST_TIMED_OUT, as ControllerApis answers a request whose timeoutMs
// passed.
func requestCode(err error) (int16, *string) {
	if errors.Is(err, context.DeadlineExceeded) {
		return kerr.RequestTimedOut.Code, kafkaMessage(kerr.RequestTimedOut.Code)
	}
	return apiCode(err)
}

// alterReassignmentsFailed answers every partition of r, and the top
// level, with code.
func alterReassignmentsFailed(r *kmsg.AlterPartitionAssignmentsRequest, resp *kmsg.AlterPartitionAssignmentsResponse, code int16, msg *string) {
	resp.ErrorCode, resp.ErrorMessage = code, msg
	for _, t := range r.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage = p.Partition, code, msg
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
}

// listPartitionReassignments answers ListPartitionReassignments as
// ControllerApis and ReplicationControlManager.listPartitionReassignments,
// from the active controller's image: null topics list every reassignment
// in progress; named partitions that do not exist or are not being
// reassigned are left out, as are topics left with none.
func (n *clusterNode) listPartitionReassignments(ctx context.Context, r *kmsg.ListPartitionReassignmentsRequest) *kmsg.ListPartitionReassignmentsResponse {
	resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	var topics []controller.ListReassignmentsTopic
	if r.Topics != nil {
		topics = []controller.ListReassignmentsTopic{}
		for _, t := range r.Topics {
			topics = append(topics, controller.ListReassignmentsTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
	}
	ctx, cancel := requestContext(ctx, r.TimeoutMillis)
	defer cancel()
	var ongoing []controller.OngoingReassignment
	err := n.active.do(ctx, func(_ *controller.Controller, img *metadata.Image, _ time.Time, _ int64) ([]metadata.Record, error) {
		ongoing = controller.ListPartitionReassignments(img, topics)
		return nil, nil
	})
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = requestCode(err)
		return resp
	}
	resp.Topics = []kmsg.ListPartitionReassignmentsResponseTopic{}
	for _, o := range ongoing {
		if len(resp.Topics) == 0 || resp.Topics[len(resp.Topics)-1].Topic != o.Topic {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = o.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition, rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = o.Partition, o.Replicas, o.AddingReplicas, o.RemovingReplicas
		last := &resp.Topics[len(resp.Topics)-1]
		last.Partitions = append(last.Partitions, rp)
	}
	return resp
}
