package controller

import (
	"github.com/cascade-kafka/cascade/broker/metadata"
)

// planner plans topic operations on img's registered brokers with the
// controller's defaults and random source.
func (c *Controller) planner(img *metadata.Image) *metadata.Planner {
	return &metadata.Planner{Broker: c.cfg.Broker, NumPartitions: c.cfg.NumPartitions,
		ReplicationFactor: c.cfg.DefaultReplicationFactor, Cluster: metadata.Registrations{Image: img},
		IDs: c.cfg.Rand, Placement: c.cfg.Rand}
}

// CreateTopics plans topics on the registered brokers, as Kafka's
// ReplicationControlManager.createTopics: each topic is validated on its
// own (its result carries its error), replicas are placed rack-aware
// across the usable brokers (metadata.Place), the ISR is the active
// replicas and the leader the first of them. All created topics form one
// batch; with validateOnly no records are returned.
func (c *Controller) CreateTopics(img *metadata.Image, reqs []metadata.CreateTopic, validateOnly bool) ([]metadata.Record, []metadata.CreateResult, error) {
	b := &batch{img: img}
	out := make([]metadata.CreateResult, len(reqs))
	budget := metadata.MaxPartitionsPerRequest
	for i, req := range reqs {
		out[i].Name = req.Name
		recs, topic, err := c.planner(b.img).CreateTopic(b.img, req, &budget)
		if err != nil {
			out[i].Err = err
			continue
		}
		out[i].Topic = topic
		if err := b.add(recs...); err != nil {
			return nil, nil, err
		}
	}
	if validateOnly {
		return nil, out, nil
	}
	return b.recs, out, nil
}

// DeleteTopics plans the removal of topics, by id or by name, in one batch.
// The caller checks delete.topic.enable.
func (c *Controller) DeleteTopics(img *metadata.Image, reqs []metadata.DeleteTopic) ([]metadata.Record, []metadata.DeleteResult, error) {
	b := &batch{img: img}
	out := make([]metadata.DeleteResult, len(reqs))
	for i, req := range reqs {
		out[i].Name, out[i].ID = req.Name, req.ID
		t, rec, err := metadata.ResolveDeleteTopic(b.img, req)
		if err != nil {
			out[i].Err = err
			continue
		}
		out[i].Name, out[i].ID = t.Name, t.ID
		if err := b.add(rec); err != nil {
			return nil, nil, err
		}
	}
	return b.recs, out, nil
}

// CreatePartitions plans raising partition counts, as Kafka's
// ReplicationControlManager.createPartitions, placing new replicas as
// CreateTopics does. With validateOnly no records are returned.
func (c *Controller) CreatePartitions(img *metadata.Image, reqs []metadata.CreatePartitions, validateOnly bool) ([]metadata.Record, []metadata.CreatePartitionsResult, error) {
	b := &batch{img: img}
	out := make([]metadata.CreatePartitionsResult, len(reqs))
	budget := metadata.MaxPartitionsPerRequest
	for i, req := range reqs {
		out[i].Name = req.Name
		recs, err := c.planner(b.img).CreatePartitions(b.img, req, &budget)
		if err != nil {
			out[i].Err = err
			continue
		}
		if err := b.add(recs...); err != nil {
			return nil, nil, err
		}
	}
	if validateOnly {
		return nil, out, nil
	}
	return b.recs, out, nil
}

// IncrementalAlterTopicConfigs plans config operations on one topic, as the
// single-node Store does (metadata.Planner.IncrementalAlterTopicConfigs).
func (c *Controller) IncrementalAlterTopicConfigs(img *metadata.Image, topic string, ops []metadata.ConfigOp) ([]metadata.Record, error) {
	return c.planner(img).IncrementalAlterTopicConfigs(img, topic, ops)
}

// AlterTopicConfigs plans replacing one topic's overrides (legacy
// AlterConfigs).
func (c *Controller) AlterTopicConfigs(img *metadata.Image, topic string, configs map[string]*string) ([]metadata.Record, error) {
	return c.planner(img).AlterTopicConfigs(img, topic, configs)
}

// ProducerIDBlockSize is how many producer ids one AllocateProducerIds
// hands out, as Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
const ProducerIDBlockSize = 1000

// ProducerIDBlock is AllocateProducerIdsResponse's content.
type ProducerIDBlock struct {
	First int64
	Size  int32
}

// AllocateProducerIDs reserves the next block of producer ids for a
// broker, as Kafka's ProducerIdControlManager.generateNextProducerId: the
// broker epoch must be current, and the ProducerIdsRecord moves the image's
// next producer id past the block, so blocks never overlap.
func (c *Controller) AllocateProducerIDs(img *metadata.Image, brokerID int32, brokerEpoch int64) ([]metadata.Record, ProducerIDBlock, error) {
	reg, ok := img.Broker(brokerID)
	if !ok {
		return nil, ProducerIDBlock{}, newErr(ErrStaleBrokerEpoch, "No broker registration found for broker id %d", brokerID)
	}
	if reg.Epoch != brokerEpoch {
		return nil, ProducerIDBlock{}, newErr(ErrStaleBrokerEpoch, "Expected broker epoch %d, but got broker epoch %d", reg.Epoch, brokerEpoch)
	}
	first := img.NextProducerID
	if first > (1<<63-1)-ProducerIDBlockSize {
		return nil, ProducerIDBlock{}, newErr(ErrUnknownServerError, "Exhausted all producerIds as the next block's end producerId has exceeded the int64 type limit")
	}
	rec := metadata.ProducerIDsRecord{BrokerID: brokerID, BrokerEpoch: brokerEpoch, NextProducerID: first + ProducerIDBlockSize}
	return []metadata.Record{rec}, ProducerIDBlock{First: first, Size: ProducerIDBlockSize}, nil
}
