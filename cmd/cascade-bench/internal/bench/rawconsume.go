package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawFetchVersion is the newest Fetch version the raw consumer sends: v13
// names topics by id.
const rawFetchVersion = 12

// rawFetchGroups bounds the fetches the raw consumer keeps in flight per
// connection. Each partition is in one group, and each group has one
// fetch outstanding, so pipelined fetches never ask for the same records.
const rawFetchGroups = 5

// rawFetchPart is one partition a raw consumer reads, up to end.
type rawFetchPart struct {
	id        int32
	next, end int64
}

// rawFetchGroup is a set of partitions fetched together, one request at
// a time.
type rawFetchGroup struct {
	c     *rawConn
	v     int16
	parts []*rawFetchPart
	done  chan<- error
}

func (d *rawDriver) consume(ctx context.Context, job *consumeJob) error {
	if len(job.ends) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	boot, lay, err := openRaw(ctx, job.addr, job.topic)
	if err != nil {
		return err
	}
	defer boot.close()
	conns := &rawConns{ctx: ctx, addrs: lay.addrs, conns: map[int32]*rawConn{}}
	defer conns.close()
	byNode := map[int32][]*rawFetchPart{}
	for p, end := range job.ends {
		node, ok := lay.leaders[p]
		if !ok {
			return fmt.Errorf("raw consumer: no leader for partition %d", p)
		}
		byNode[node] = append(byNode[node], &rawFetchPart{id: p, end: end})
	}
	var groups []*rawFetchGroup
	done := make(chan error, len(job.ends))
	for node, ps := range byNode {
		c, err := conns.get(node)
		if err != nil {
			return err
		}
		v, err := c.version(1, 4, rawFetchVersion)
		if err != nil {
			return err
		}
		slices.SortFunc(ps, func(a, b *rawFetchPart) int { return int(a.id - b.id) })
		n := min(len(ps), rawFetchGroups)
		start := len(groups)
		for range n {
			groups = append(groups, &rawFetchGroup{c: c, v: v, done: done})
		}
		for i, p := range ps {
			g := groups[start+i%n]
			g.parts = append(g.parts, p)
		}
	}
	for _, g := range groups {
		sent, err := d.fetch(job, g)
		if err != nil {
			return err
		}
		if !sent {
			done <- nil
		}
	}
	for range groups {
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("raw consumer stopped before reading every partition: %w", ctx.Err())
		}
	}
	job.ended()
	return nil
}

// fetch sends the group's next fetch, if it has a partition not yet read
// to its end: every such partition, from its next offset. The response is
// checked in the connection's reader, which sends the group's next fetch,
// or reports the group done once it has checked the last batches.
func (d *rawDriver) fetch(job *consumeJob, g *rawFetchGroup) (sent bool, err error) {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes = g.v, -1, 500, 1
	req.MaxBytes, req.SessionEpoch = 50<<20, -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic = job.topic
	for _, p := range g.parts {
		if p.next >= p.end {
			continue
		}
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p.id, p.next, int32(job.w.FetchSize)
		fp.CurrentLeaderEpoch, fp.LogStartOffset = -1, -1
		t.Partitions = append(t.Partitions, fp)
	}
	if len(t.Partitions) == 0 {
		return false, nil
	}
	req.Topics = append(req.Topics, t)
	return true, g.c.send(req, func(body []byte, err error) {
		var batches [][]byte
		if err == nil {
			batches, err = d.fetched(job, g, body)
		}
		more := false
		if err == nil {
			// The next fetch goes out before this one's batches are
			// checked, so the broker works while the consumer does.
			more, err = d.fetch(job, g)
		}
		if err != nil {
			g.done <- err
			return
		}
		var n int
		for _, b := range batches {
			n += d.t.check(b, job.v)
		}
		job.consumed.Add(int64(n))
		job.bytes.Add(int64(n) * int64(job.w.PayloadBytes))
		if !more {
			g.done <- nil
		}
	})
}

// fetched decodes a fetch response, advances the group's offsets past its
// whole batches and returns them, to be checked.
func (d *rawDriver) fetched(job *consumeJob, g *rawFetchGroup, body []byte) ([][]byte, error) {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = g.v
	if err := decodeResponse(resp, body); err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("raw consumer: fetch: %w", err)
	}
	var batches [][]byte
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			var part *rawFetchPart
			for _, p := range g.parts {
				if p.id == rp.Partition {
					part = p
				}
			}
			if part == nil || rt.Topic != job.topic {
				return nil, fmt.Errorf("raw consumer: fetch answered %s-%d, not asked for", rt.Topic, rp.Partition)
			}
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return nil, fmt.Errorf("raw consumer: fetch %s-%d at %d: %w", job.topic, rp.Partition, part.next, err)
			}
			var err error
			if batches, err = take(job.topic, part, rp.RecordBatches, batches); err != nil {
				return nil, err
			}
		}
	}
	return batches, nil
}

// take appends the whole batches of one partition's fetched data from the
// partition's next offset to batches and moves the offset past them; a
// batch cut short by the size limit at the end is fetched again next time.
func take(topic string, part *rawFetchPart, data []byte, batches [][]byte) ([][]byte, error) {
	for len(data) >= batchHeaderBytes {
		size := 12 + int(int32(binary.BigEndian.Uint32(data[batchLengthPos:])))
		if size < batchHeaderBytes || size > len(data) {
			break
		}
		b := data[:size]
		data = data[size:]
		base := int64(binary.BigEndian.Uint64(b))
		last := base + int64(int32(binary.BigEndian.Uint32(b[lastDeltaPos:])))
		if last < part.next {
			continue // Already read: a broker returns whole batches.
		}
		if base < part.next {
			return nil, fmt.Errorf("raw consumer: %s-%d: batch at %d..%d overlaps offset %d", topic, part.id, base, last, part.next)
		}
		batches = append(batches, b)
		part.next = last + 1
	}
	return batches, nil
}
