package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawDriver is the raw client: a producer that replays prebuilt batches in
// hand-framed Produce requests and a consumer that checks fetched batches
// by their headers and checksums, so the load tool spends next to nothing
// per record and the broker, not the client, sets the pace.
type rawDriver struct {
	t *rawTemplates
}

// rawInFlight is the raw producer's limit of Produce requests in flight
// per connection: what franz-go allows, five with idempotence (Kafka's
// max.in.flight.requests.per.connection at its idempotent maximum) and
// one without.
func rawInFlight(w Workload) int {
	if w.Acks == "all" {
		return 5
	}
	return 1
}

// rawProduceVersion is the newest Produce version the raw producer frames:
// v9 to v12 share one flexible request layout with topic names (v13 names
// topics by id).
const rawProduceVersion = 12

// rawSend is one batch a producer sends: count records from first, to a
// partition.
type rawSend struct {
	first     int64
	count     int
	partition int32
	// slot is the partition's index in the connection's list.
	slot int
	tmpl *rawTemplate
	// skip marks the planted loss: counted as sent, never sent. extra
	// marks the planted duplicate: sent, counted neither as offered nor as
	// acknowledged.
	skip, extra bool
}

// rawPartition is one partition's queue of sends within a producer, and
// its next idempotent sequence.
type rawPartition struct {
	id    int32
	sends []rawSend
	next  int
	seq   int32
}

// rawRequest is one Produce request in flight: its batches and when they
// were offered.
type rawRequest struct {
	sends   []rawSend
	offered time.Time
}

func (d *rawDriver) produce(ctx context.Context, job *produceJob) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	boot, lay, err := openRaw(ctx, job.addr, job.topic)
	if err != nil {
		return err
	}
	conns := &rawConns{ctx: ctx, addrs: lay.addrs, conns: map[int32]*rawConn{}}
	defer conns.close()
	defer boot.close()
	pid, epoch := int64(-1), int16(-1)
	if job.w.Acks == "all" {
		if pid, epoch, err = initProducerID(ctx, boot); err != nil {
			return err
		}
	}
	parts := d.plan(job, len(lay.leaders))
	byNode := map[int32][]*rawPartition{}
	for _, p := range parts {
		if len(p.sends) > 0 {
			byNode[lay.leaders[p.id]] = append(byNode[lay.leaders[p.id]], p)
		}
	}
	var wg sync.WaitGroup
	for node, ps := range byNode {
		c, err := conns.get(node)
		if err != nil {
			return err
		}
		wg.Go(func() {
			if err := d.produceTo(ctx, c, job, ps, pid, epoch); err != nil {
				job.errs.set(err)
				cancel()
			}
		})
	}
	wg.Wait()
	return job.errs.get()
}

// plan deals a producer's records into sends of a full batch each (the
// last one shorter) and the sends to partitions round-robin, starting at
// a partition that depends on the producer, as a sticky partitioner
// spreads full batches.
func (d *rawDriver) plan(job *produceJob, partitions int) []*rawPartition {
	parts := make([]*rawPartition, partitions)
	for i := range parts {
		parts[i] = &rawPartition{id: int32(i)}
	}
	n := int64(d.t.perBatch)
	p0 := int(job.first / n)
	for k := int64(0); k*n < job.count; k++ {
		first := job.first + k*n
		s := rawSend{first: first, count: int(min(n, job.count-k*n)), partition: int32((p0 + int(k)) % partitions)}
		s.tmpl = d.t.template(s.first, s.count)
		s.skip = job.skip >= first && job.skip < first+int64(s.count)
		if job.corrupt >= first && job.corrupt < first+int64(s.count) && s.count == d.t.perBatch {
			// A batch whose header and CRC are right but whose records
			// are another template's: what a broker that served the
			// wrong bytes would look like.
			s.tmpl = d.t.full[(mix64(uint64(first))+1)%rawFullTemplates]
		}
		p := parts[s.partition]
		p.sends = append(p.sends, s)
		if job.dup >= first && job.dup < first+int64(s.count) {
			// The same records once more under a new sequence number.
			s.extra = true
			p.sends = append(p.sends, s)
		}
	}
	return parts
}

// produceTo sends the partitions' batches on one connection, one batch
// per partition in each request, with up to rawInFlight requests
// outstanding.
func (d *rawDriver) produceTo(ctx context.Context, c *rawConn, job *produceJob, parts []*rawPartition, pid int64, epoch int16) error {
	v, err := c.version(0, 9, rawProduceVersion)
	if err != nil {
		return err
	}
	acks := int16(-1)
	switch job.w.Acks {
	case "1":
		acks = 1
	case "0":
		acks = 0
	}
	for i, p := range parts {
		for k := range p.sends {
			p.sends[k].slot = i
		}
	}
	slots := make(chan struct{}, rawInFlight(job.w))
	pace := newPacer(job.rate)
	perRequest := len(parts)
	if pace != nil {
		perRequest = 1 // A paced producer sends each batch when it is due.
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	var scratch []byte
	var marks []int
	var bufs net.Buffers
	var headers [][batchHeaderBytes]byte
	for i := 0; ; i++ {
		req := &rawRequest{}
		for j := range parts {
			p := parts[(i+j)%len(parts)]
			if len(req.sends) < perRequest && p.next < len(p.sends) {
				req.sends = append(req.sends, p.sends[p.next])
				p.next++
			}
		}
		if len(req.sends) == 0 {
			if acks == 0 {
				// Nothing answers a Produce with acks=0, but a broker
				// handles a connection's requests in order: once this
				// one is answered, every batch sent before it is in the
				// log, and the end offsets listed next count it.
				return c.call(kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrApiVersionsResponse())
			}
			return nil
		}
		offered, err := pace.offer(ctx, req.sends[0].first-job.first)
		if err != nil {
			return err
		}
		req.offered = offered
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		job.offered.Add(int64(countRecords(req.sends)))
		var live []rawSend
		for _, s := range req.sends {
			if s.skip {
				job.acked.Add(int64(s.count))
				continue
			}
			live = append(live, s)
		}
		req.sends = live
		if len(live) == 0 {
			<-slots
			continue
		}
		if cap(headers) < len(live) {
			headers = make([][batchHeaderBytes]byte, len(live))
		}
		// The frame: the head up to the partition count, then per batch its
		// partition index and records length (after the previous
		// partition's empty tags), its header and its records, then the
		// last partition's, the topic's and the request's empty tags. Only
		// the small pieces are written here; the records are the
		// template's own bytes.
		scratch = appendProduceHead(scratch[:0], v, acks, job.topic, len(live))
		marks = append(marks[:0], len(scratch))
		for k, s := range live {
			p := parts[s.slot]
			d.t.stamp(&headers[k], s.tmpl, s.first, pid, epoch, p.seq)
			if pid >= 0 {
				p.seq = nextSequence(p.seq, s.count)
			}
			if k > 0 {
				scratch = append(scratch, 0)
			}
			scratch = binary.BigEndian.AppendUint32(scratch, uint32(s.partition))
			scratch = binary.AppendUvarint(scratch, uint64(batchHeaderBytes+len(s.tmpl.records)+1))
			marks = append(marks, len(scratch))
		}
		scratch = append(scratch, 0, 0, 0)
		binary.BigEndian.PutUint32(scratch, uint32(len(scratch)-4+rawRecordsBytes(live)))
		bufs = append(bufs[:0], scratch[:marks[0]])
		for k, s := range live {
			bufs = append(bufs, scratch[marks[k]:marks[k+1]], headers[k][:], s.tmpl.records)
		}
		bufs = append(bufs, scratch[marks[len(live)]:])
		var fn func([]byte, error)
		if acks != 0 {
			wg.Add(1)
			fn = func(body []byte, err error) {
				defer wg.Done()
				defer func() { <-slots }()
				d.acked(job, req, v, body, err)
			}
		}
		c.mu.Lock()
		err = c.sendLocked(bufs, fn)
		c.mu.Unlock()
		if err != nil {
			if fn != nil {
				wg.Done()
			}
			return err
		}
		if acks == 0 {
			d.acked(job, req, v, nil, nil)
			<-slots
		}
	}
}

// countRecords counts the records of sends, the planted duplicate aside.
func countRecords(ss []rawSend) int {
	n := 0
	for _, s := range ss {
		if !s.extra {
			n += s.count
		}
	}
	return n
}

// rawRecordsBytes is what the batches of a request add to its size besides
// the scratch segments.
func rawRecordsBytes(ss []rawSend) int {
	n := 0
	for _, s := range ss {
		n += batchHeaderBytes + len(s.tmpl.records)
	}
	return n
}

// nextSequence is Kafka's DefaultRecordBatch.incrementSequence: sequences
// wrap from the largest int32 to 0.
func nextSequence(seq int32, n int) int32 {
	if int64(seq) > int64(1<<31-1)-int64(n) {
		return int32(int64(n) - (int64(1<<31-1) - int64(seq)) - 1)
	}
	return seq + int32(n)
}

// appendProduceHead appends a Produce request's size placeholder, header
// (v2: key, version, correlation id placeholder, client id, no tags) and
// body up to its one topic's partition count: no transactional id, acks,
// a 30 s timeout, the topic name.
func appendProduceHead(b []byte, v, acks int16, topic string, partitions int) []byte {
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(v))
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(len(rawClientID)))
	b = append(b, rawClientID...)
	b = append(b, 0) // header tags
	b = append(b, 0) // null transactional id
	b = binary.BigEndian.AppendUint16(b, uint16(acks))
	b = binary.BigEndian.AppendUint32(b, 30_000)
	b = binary.AppendUvarint(b, 2) // one topic
	b = binary.AppendUvarint(b, uint64(len(topic)+1))
	b = append(b, topic...)
	return binary.AppendUvarint(b, uint64(partitions+1))
}

// acked accounts for a Produce response: every batch of the request is
// acknowledged or failed by its partition's error code.
func (d *rawDriver) acked(job *produceJob, req *rawRequest, v int16, body []byte, err error) {
	codes := map[int32]int16{}
	if err == nil && body != nil {
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = v
		err = decodeResponse(resp, body)
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				codes[p.Partition] = p.ErrorCode
			}
		}
	}
	lat := time.Since(req.offered)
	for _, s := range req.sends {
		code, ok := codes[s.partition]
		serr := err
		if serr == nil && body != nil && !ok {
			serr = fmt.Errorf("no answer for partition %d", s.partition)
		}
		if serr == nil {
			serr = kerr.ErrorForCode(code)
		}
		if serr != nil {
			job.failed.Add(int64(s.count))
			job.errs.set(fmt.Errorf("records %d..%d to partition %d: %w", s.first, s.first+int64(s.count)-1, s.partition, serr))
			continue
		}
		if !s.extra {
			job.lat.recordN(lat, s.count)
			job.acked.Add(int64(s.count))
		}
	}
}

// initProducerID asks for an idempotent producer id and epoch, retrying
// retriable errors (a fresh Kafka broker answers COORDINATOR_LOAD_IN_PROGRESS
// until its producer id block is allocated) for up to 30 s, as a client's
// retries would.
func initProducerID(ctx context.Context, c *rawConn) (int64, int16, error) {
	v, err := c.version(22, 0, 4)
	if err != nil {
		return 0, 0, err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionTimeoutMillis = v, 60_000
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp := kmsg.NewPtrInitProducerIDResponse()
		if err := c.call(req, resp); err != nil {
			return 0, 0, err
		}
		err := kerr.ErrorForCode(resp.ErrorCode)
		if err == nil {
			return resp.ProducerID, resp.ProducerEpoch, nil
		}
		if !kerr.IsRetriable(err) || time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("raw client: InitProducerId: %w", err)
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
