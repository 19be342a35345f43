package handler

import (
	"context"
	"path/filepath"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/acl"
	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/partition"
)

// DescribeLogDirs: v1-5
//
// Kafka 4's floor is v1 (KIP-896).
//   - v2: flexible
//   - v3: top-level ErrorCode
//   - v4: each dir's TotalBytes and UsableBytes (KIP-827)
//   - v5: each dir's IsCordoned (KIP-1066). Cascade cannot cordon a log
//     dir (cordoned.log.dirs is refused at start), so it is always false,
//     as Kafka reports a dir outside cordoned.log.dirs.
//
// Every log dir is listed, each with the sizes of the hosted partitions it
// holds; null Topics asks for every partition. OffsetLag is 0 because a
// single node has no future (moving) replicas.
func init() { register(35, 1, 5, handleDescribeLogDirs) }

// dirLog is implemented by a partition log that knows its directory
// (<log dir>/<topic>-<partition>); without it every partition is reported
// in the first log dir.
type dirLog interface {
	Dir() string
}

func handleDescribeLogDirs(ctx context.Context, env *Env, req *Request) (kmsg.Response, error) {
	r := req.Msg.(*kmsg.DescribeLogDirsRequest)
	resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	resp.SetVersion(req.Version)
	if !env.authorizeCluster(req, acl.Describe) {
		// As KafkaApis.handleDescribeLogDirsRequest: no results.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}

	var parts []*partition.Partition
	if r.Topics == nil {
		parts = env.Partitions.All()
	} else {
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if part := env.Partitions.Get(log.TopicPartition{Topic: t.Topic, Partition: p}); part != nil {
					parts = append(parts, part)
				}
			}
		}
	}
	sort.Slice(parts, func(i, j int) bool {
		a, b := parts[i].TopicPartition(), parts[j].TopicPartition()
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})

	dirs := env.Config.LogDirs
	abs := make([]string, len(dirs))
	index := map[string]int{}
	for i, d := range dirs {
		a, err := filepath.Abs(d)
		if err != nil {
			a = d
		}
		abs[i] = a
		index[filepath.Clean(d)], index[a] = i, i
	}
	byDir := make([][]*partition.Partition, len(dirs))
	for _, p := range parts {
		i := 0
		if dl, ok := p.Log().(dirLog); ok {
			if j, ok := index[filepath.Dir(filepath.Clean(dl.Dir()))]; ok {
				i = j
			}
		}
		byDir[i] = append(byDir[i], p)
	}
	for i := range dirs {
		d := kmsg.NewDescribeLogDirsResponseDir()
		d.Dir = abs[i]
		d.TotalBytes, d.UsableBytes = diskSpace(abs[i])
		var cur *kmsg.DescribeLogDirsResponseDirTopic
		for _, p := range byDir[i] {
			tp := p.TopicPartition()
			if cur == nil || cur.Topic != tp.Topic {
				d.Topics = append(d.Topics, kmsg.NewDescribeLogDirsResponseDirTopic())
				cur = &d.Topics[len(d.Topics)-1]
				cur.Topic = tp.Topic
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition = tp.Partition
			rp.Size = p.Log().Size()
			cur.Partitions = append(cur.Partitions, rp)
		}
		resp.Dirs = append(resp.Dirs, d)
	}
	return resp, nil
}
