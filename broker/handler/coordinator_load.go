package handler

import (
	"bytes"

	"github.com/cascade-kafka/cascade/broker/partition"
	"github.com/cascade-kafka/cascade/broker/record"
)

// loadChunk is how many bytes of an internal topic partition one read
// returns while a coordinator loads it.
const loadChunk = 1 << 20

// forEachBatch reads p from offset from to its log end, in chunks, and
// calls fn with every batch in offset order: the loading loop shared by the
// group and transaction coordinators (Kafka's CoordinatorLoaderImpl and
// TransactionStateManager read their partitions the same way). A batch the
// previous chunk already covered is not passed again.
func forEachBatch(p *partition.Partition, from int64, fn func(record.Batch) error) error {
	off := from
	for off < p.LogEndOffset() {
		rr, err := p.Read(off, loadChunk, partition.ReadLogEnd, true)
		if err != nil {
			return err
		}
		if len(rr.Regions) == 0 {
			break
		}
		var buf bytes.Buffer
		for _, r := range rr.Regions {
			_, werr := r.WriteTo(&buf)
			r.Release()
			if werr != nil && err == nil {
				err = werr
			}
		}
		if err != nil {
			return err
		}
		set := buf.Bytes()
		for len(set) > 0 {
			b, rest, err := record.Next(set)
			if err != nil {
				return err
			}
			set = rest
			if b.NextOffset() <= off {
				continue
			}
			off = b.NextOffset()
			if err := fn(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// replayRecords calls fn with the key and value of every record of b,
// decompressing at most maxBytes; fn's error is logged by the caller's
// choice (it returns nothing), while a batch that cannot be read is an error.
func replayRecords(b record.Batch, maxBytes int, fn func(offset int64, key, value []byte)) error {
	it, err := b.Records(maxBytes, nil)
	if err != nil {
		return err
	}
	for {
		r, ok := it.Next()
		if !ok {
			break
		}
		fn(b.BaseOffset()+int64(r.OffsetDelta), r.Key, r.Value)
	}
	return it.Err()
}
