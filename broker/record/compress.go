package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// xerialMagic starts snappy data framed by snappy-java's SnappyOutputStream,
// which is what Kafka's Java producer and broker write.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderLen = 16 // magic, int32 version, int32 min compatible version

// Decompress inflates a batch payload compressed with codec. The result never
// exceeds limit bytes: a larger payload yields ErrTooLarge without being
// inflated further. scratch is reused when its capacity suffices.
func Decompress(codec Codec, src []byte, limit int, scratch []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		if len(src) > limit {
			return nil, ErrTooLarge
		}
		return src, nil
	case CodecGzip:
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrRecords, err)
		}
		defer zr.Close()
		return readLimited(zr, limit, scratch, "gzip")
	case CodecSnappy:
		return decodeSnappy(src, limit, scratch)
	case CodecLZ4:
		lr := lz4Readers.Get().(*lz4Reader)
		lr.src.Reset(src)
		lr.zr.Reset(&lr.src)
		out, err := readLimited(lr.zr, limit, scratch, "lz4")
		// Reset hands the reader's block buffers back to the library's
		// pool and drops the reference to src before the reader is pooled.
		lr.zr.Reset(nil)
		lr.src.Reset(nil)
		lz4Readers.Put(lr)
		return out, err
	case CodecZstd:
		// The same window limit and decoder pooling as validation:
		// stored batches passed it, but the log cleaner and timestamp
		// lookups must not trust a segment blindly.
		l := Limits{MaxBytes: limit}
		window, err := zstdWindow(src, l)
		if err != nil {
			return nil, err
		}
		d, pooled, err := zstdDecoder(window, l.maxMemory())
		if err != nil {
			return nil, fmt.Errorf("zstd decoder: %w", err)
		}
		defer releaseZstd(d, pooled)
		if err := d.Reset(bytes.NewReader(src)); err != nil {
			return nil, zstdError(err)
		}
		out, err := readLimited(d, limit, scratch, "zstd")
		if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
			return nil, fmt.Errorf("%w: %w", ErrDecodeMemory, err)
		}
		return out, err
	}
	return nil, fmt.Errorf("%w: %d", ErrCodec, codec)
}

// readLimited reads r to its end into scratch, growing it as needed but never
// past limit+1 bytes: one byte more than limit is enough to tell that the
// payload is too large, so a decompression bomb costs at most limit bytes.
// Reading straight into the slice (rather than through a bytes.Buffer and an
// io.LimitReader) allocates nothing when scratch is large enough, and the
// grown slice is returned so that a caller may keep it (RecordsReuse).
func readLimited(r io.Reader, limit int, scratch []byte, name string) ([]byte, error) {
	buf := scratch[:0]
	for {
		end := min(cap(buf), limit+1)
		if len(buf) == end {
			// Double, starting from 64 KiB (Kafka's LZ4 block size),
			// up to limit+1 (plus the allocator's size-class rounding,
			// which is never read into).
			buf = slices.Grow(buf, min(max(cap(buf), 64<<10), limit+1-len(buf)))
			end = min(cap(buf), limit+1)
		}
		n, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return nil, ErrTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrRecords, name, err)
		}
	}
}

func decodeSnappy(src []byte, limit int, scratch []byte) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return snappyBlock(scratch[:0], src, limit)
	}
	if len(src) < xerialHeaderLen {
		return nil, fmt.Errorf("%w: short xerial header", ErrRecords)
	}
	out := scratch[:0]
	p := src[xerialHeaderLen:]
	for len(p) > 0 {
		if len(p) < 4 {
			return nil, fmt.Errorf("%w: truncated xerial chunk length", ErrRecords)
		}
		n := binary.BigEndian.Uint32(p)
		p = p[4:]
		if uint64(n) > uint64(len(p)) {
			return nil, fmt.Errorf("%w: xerial chunk of %d bytes exceeds payload", ErrRecords, n)
		}
		var err error
		if out, err = snappyBlock(out, p[:n], limit-len(out)); err != nil {
			return nil, err
		}
		p = p[n:]
	}
	return out, nil
}

// snappyBlock appends the decoding of one raw snappy block to dst.
func snappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrRecords, err)
	}
	if n > limit {
		return nil, ErrTooLarge
	}
	start := len(dst)
	if cap(dst)-start < n {
		grown := make([]byte, start, start+n)
		copy(grown, dst)
		dst = grown
	}
	out, err := snappy.Decode(dst[start:start+n], block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrRecords, err)
	}
	if len(out) != n {
		return nil, fmt.Errorf("%w: snappy length mismatch", ErrRecords)
	}
	return dst[:start+n], nil
}

// lz4Reader is a pooled LZ4 frame reader together with the bytes.Reader it
// reads from, so that decoding a batch allocates neither.
type lz4Reader struct {
	zr  *lz4.Reader
	src bytes.Reader
}

// LZ4 readers and writers are pooled: each holds block buffers that cost
// more to allocate than a batch costs to decode. (The reader's block
// buffers themselves come from the library's per-size pools, sized by the
// frame's declared block size: 64 KiB for Kafka's Java client, 4 MiB for
// franz-go's default writer.)
var (
	lz4Readers = sync.Pool{New: func() any { return &lz4Reader{zr: lz4.NewReader(nil)} }}
	lz4Writers = sync.Pool{New: func() any { return lz4.NewWriter(nil) }}
)

// zstdEncoder returns a shared encoder: building one costs far more than
// compressing a batch, and EncodeAll is safe for concurrent use.
var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
})

// Compress compresses a records payload with codec, in the framing Kafka's
// Java client writes: gzip member, xerial-framed snappy, LZ4 frame, zstd frame.
func Compress(codec Codec, src []byte) ([]byte, error) {
	var buf bytes.Buffer
	switch codec {
	case CodecNone:
		return append([]byte(nil), src...), nil
	case CodecGzip:
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case CodecSnappy:
		// snappy-java: header (magic, version 1, compatible 1), then
		// length-prefixed blocks of at most 32 KiB input.
		buf.Write(xerialMagic)
		var hdr [8]byte
		binary.BigEndian.PutUint32(hdr[0:], 1)
		binary.BigEndian.PutUint32(hdr[4:], 1)
		buf.Write(hdr[:])
		for p := src; len(p) > 0; {
			n := min(len(p), 32<<10)
			enc := snappy.Encode(nil, p[:n])
			binary.BigEndian.PutUint32(hdr[:4], uint32(len(enc)))
			buf.Write(hdr[:4])
			buf.Write(enc)
			p = p[n:]
		}
	case CodecLZ4:
		// 64 KiB blocks, as Kafka's KafkaLZ4BlockOutputStream writes by
		// default (the library's 4 MiB default costs a 4 MiB buffer).
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		w.Reset(&buf)
		if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			return nil, err
		}
		if _, err := w.Write(src); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case CodecZstd:
		enc, err := zstdEncoder()
		if err != nil {
			return nil, err
		}
		return enc.EncodeAll(src, nil), nil
	default:
		return nil, fmt.Errorf("%w: %d", ErrCodec, codec)
	}
	return buf.Bytes(), nil
}
