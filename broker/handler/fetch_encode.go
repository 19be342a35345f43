package handler

import (
	"fmt"
	"io"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/log"
)

// inlineRegionBytes is the size below which a partition's file regions are
// copied into the response buffer rather than spliced with sendfile: one
// write of a few small partitions is cheaper than a syscall per partition.
const inlineRegionBytes = 8 << 10

// fetchBody is an encoded Fetch response whose record bytes are file regions
// written straight from the page cache (sendfile on a *net.TCPConn), the way
// Kafka's FetchResponse sends FileRecords through a TransferableChannel. The
// body is buf[cuts[i-1]:cuts[i]] followed by regions[i], in turn.
type fetchBody struct {
	buf     []byte
	cuts    []int
	regions [][]log.Region
	n       int
}

// Len returns the encoded size.
func (b *fetchBody) Len() int { return b.n }

// WriteTo writes the body to w; regions use their own WriteTo, which splices
// when w is a TCP connection.
func (b *fetchBody) WriteTo(w io.Writer) (int64, error) {
	var total int64
	prev := 0
	for i, cut := range b.cuts {
		if cut > prev {
			n, err := w.Write(b.buf[prev:cut])
			total += int64(n)
			if err != nil {
				return total, err
			}
		}
		prev = cut
		for _, r := range b.regions[i] {
			n, err := r.WriteTo(w)
			total += n
			if err != nil {
				return total, err
			}
		}
	}
	if prev < len(b.buf) {
		n, err := w.Write(b.buf[prev:])
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// Release releases every region.
func (b *fetchBody) Release() {
	for _, rs := range b.regions {
		for _, r := range rs {
			r.Release()
		}
	}
	b.regions = nil
}

// bufWriter appends to a byte slice; it lets small regions be copied inline.
type bufWriter struct{ b *[]byte }

func (w bufWriter) Write(p []byte) (int, error) {
	*w.b = append(*w.b, p...)
	return len(p), nil
}

// appendRegion appends a region's bytes to dst: straight into dst with
// ReadAt when the region offers it (the log's regions do), so no copy
// buffer is allocated, else through WriteTo.
func appendRegion(dst []byte, r log.Region) ([]byte, error) {
	ra, ok := r.(io.ReaderAt)
	if !ok {
		_, err := r.WriteTo(bufWriter{&dst})
		return dst, err
	}
	start, n := len(dst), r.Len()
	dst = slices.Grow(dst, n)[:start+n]
	m, err := ra.ReadAt(dst[start:], 0)
	if m == n && err == io.EOF {
		err = nil
	}
	if err == nil && m != n {
		err = io.ErrUnexpectedEOF
	}
	return dst[:start+m], err
}

// encodeFetchResponse encodes resp (at its version) exactly as kmsg's
// FetchResponse.AppendTo does, except that partition i of topic t takes its
// record bytes from regions[t][i] instead of RecordBatches. A partition
// without regions is encoded with its RecordBatches, and an empty non-null
// record set when those are nil (Kafka's MemoryRecords.EMPTY). Ownership of
// the regions passes to the returned body (or, on error, they are released).
// An error means a region could not be read; the frame is unusable and the
// connection must close, as Kafka closes it when a FileRecords send fails.
func encodeFetchResponse(resp *kmsg.FetchResponse, regions [][][]log.Region) (*fetchBody, error) {
	v := resp.Version
	flex := v >= 12
	body := &fetchBody{buf: make([]byte, 0, 256)}
	dst := body.buf
	arrayLen := func(n int) {
		if flex {
			dst = kbin.AppendCompactArrayLen(dst, n)
		} else {
			dst = kbin.AppendArrayLen(dst, n)
		}
	}
	if v >= 1 {
		dst = kbin.AppendInt32(dst, resp.ThrottleMillis)
	}
	if v >= 7 {
		dst = kbin.AppendInt16(dst, resp.ErrorCode)
		dst = kbin.AppendInt32(dst, resp.SessionID)
	}
	arrayLen(len(resp.Topics))
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		if v <= 12 {
			if flex {
				dst = kbin.AppendCompactString(dst, t.Topic)
			} else {
				dst = kbin.AppendString(dst, t.Topic)
			}
		} else {
			dst = kbin.AppendUuid(dst, t.TopicID)
		}
		arrayLen(len(t.Partitions))
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			dst = kbin.AppendInt32(dst, p.Partition)
			dst = kbin.AppendInt16(dst, p.ErrorCode)
			dst = kbin.AppendInt64(dst, p.HighWatermark)
			if v >= 4 {
				dst = kbin.AppendInt64(dst, p.LastStableOffset)
			}
			if v >= 5 {
				dst = kbin.AppendInt64(dst, p.LogStartOffset)
			}
			if v >= 4 {
				at := p.AbortedTransactions
				if flex {
					dst = kbin.AppendCompactNullableArrayLen(dst, len(at), at == nil)
				} else {
					dst = kbin.AppendNullableArrayLen(dst, len(at), at == nil)
				}
				for _, a := range at {
					dst = kbin.AppendInt64(dst, a.ProducerID)
					dst = kbin.AppendInt64(dst, a.FirstOffset)
					if flex {
						dst = append(dst, 0)
					}
				}
			}
			if v >= 11 {
				dst = kbin.AppendInt32(dst, p.PreferredReadReplica)
			}
			var rs []log.Region
			if ti < len(regions) && pi < len(regions[ti]) {
				rs = regions[ti][pi]
			}
			if len(rs) == 0 {
				recs := p.RecordBatches
				if recs == nil {
					recs = []byte{}
				}
				if flex {
					dst = kbin.AppendCompactNullableBytes(dst, recs)
				} else {
					dst = kbin.AppendNullableBytes(dst, recs)
				}
			} else {
				size := 0
				for _, r := range rs {
					size += r.Len()
				}
				if flex {
					dst = kbin.AppendUvarint(dst, uint32(size)+1)
				} else {
					dst = kbin.AppendInt32(dst, int32(size))
				}
				if size < inlineRegionBytes {
					mark := len(dst)
					var err error
					for _, r := range rs {
						if err == nil {
							dst, err = appendRegion(dst, r)
						}
						r.Release()
					}
					if err == nil && len(dst)-mark != size {
						err = fmt.Errorf("handler: fetch region wrote %d bytes, announced %d", len(dst)-mark, size)
					}
					if err != nil {
						body.Release()
						releaseFrom(regions, ti, pi+1)
						return nil, err
					}
				} else {
					body.cuts = append(body.cuts, len(dst))
					body.regions = append(body.regions, rs)
					body.n += size
				}
			}
			if flex {
				dst = appendFetchPartitionTags(dst, p)
			}
		}
		if flex {
			dst = append(dst, 0)
		}
	}
	if flex {
		if len(resp.Brokers) == 0 {
			dst = append(dst, 0)
		} else {
			var bs []byte
			bs = kbin.AppendCompactArrayLen(bs, len(resp.Brokers))
			for _, b := range resp.Brokers {
				bs = kbin.AppendInt32(bs, b.NodeID)
				bs = kbin.AppendCompactString(bs, b.Host)
				bs = kbin.AppendInt32(bs, b.Port)
				bs = kbin.AppendCompactNullableString(bs, b.Rack)
				bs = append(bs, 0)
			}
			dst = append(dst, 1, 0)
			dst = kbin.AppendUvarint(dst, uint32(len(bs)))
			dst = append(dst, bs...)
		}
	}
	body.buf = dst
	body.n += len(dst)
	return body, nil
}

// releaseFrom releases the regions of every partition from (ti, pi) on.
func releaseFrom(regions [][][]log.Region, ti, pi int) {
	for ; ti < len(regions); ti++ {
		for ; pi < len(regions[ti]); pi++ {
			for _, r := range regions[ti][pi] {
				r.Release()
			}
		}
		pi = 0
	}
}

// appendFetchPartitionTags writes a flexible partition's tagged fields:
// DivergingEpoch (0), CurrentLeader (1) and SnapshotID (2) when they differ
// from their -1 defaults.
func appendFetchPartitionTags(dst []byte, p *kmsg.FetchResponseTopicPartition) []byte {
	de := p.DivergingEpoch.Epoch != -1 || p.DivergingEpoch.EndOffset != -1
	cl := p.CurrentLeader.LeaderID != -1 || p.CurrentLeader.LeaderEpoch != -1
	sn := p.SnapshotID.EndOffset != -1 || p.SnapshotID.Epoch != -1
	n := 0
	for _, b := range []bool{de, cl, sn} {
		if b {
			n++
		}
	}
	dst = kbin.AppendUvarint(dst, uint32(n))
	if de {
		dst = append(dst, 0, 13)
		dst = kbin.AppendInt32(dst, p.DivergingEpoch.Epoch)
		dst = kbin.AppendInt64(dst, p.DivergingEpoch.EndOffset)
		dst = append(dst, 0)
	}
	if cl {
		dst = append(dst, 1, 9)
		dst = kbin.AppendInt32(dst, p.CurrentLeader.LeaderID)
		dst = kbin.AppendInt32(dst, p.CurrentLeader.LeaderEpoch)
		dst = append(dst, 0)
	}
	if sn {
		dst = append(dst, 2, 13)
		dst = kbin.AppendInt64(dst, p.SnapshotID.EndOffset)
		dst = kbin.AppendInt32(dst, p.SnapshotID.Epoch)
		dst = append(dst, 0)
	}
	return dst
}
