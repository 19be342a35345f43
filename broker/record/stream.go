package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// This file streams the records of a compressed batch out of its
// decompressor through a fixed window of streamBufSize bytes, as Kafka's
// DefaultRecordBatch.skipKeyValueIterator does: a record is parsed in place
// when it fits in the window and in pieces otherwise, so validation never
// inflates the whole payload.

// pooledZstdWindow is the largest window a pooled zstd decoder accepts; what
// it keeps after use is its ring of about this size. It covers Kafka's Java
// producer at its default level (window log 21) and the Go clients. A
// payload with a frame declaring more, up to Limits.MaxMemory, gets a
// decoder of its own that is closed after the batch, so a pool never keeps
// a large window.
const pooledZstdWindow = 2 << 20

var zstdPooled = sync.Pool{New: func() any {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(pooledZstdWindow), zstd.WithDecoderMaxMemory(pooledZstdWindow))
	if err != nil {
		return err
	}
	return d
}}

// zstdDecoder returns a decoder for a payload whose largest frame window is
// window bytes, under limit, and whether it comes from the pool.
func zstdDecoder(window, limit int) (*zstd.Decoder, bool, error) {
	if window <= pooledZstdWindow && limit >= pooledZstdWindow {
		v := zstdPooled.Get()
		d, ok := v.(*zstd.Decoder)
		if !ok {
			return nil, false, fmt.Errorf("zstd decoder: %v", v)
		}
		return d, true, nil
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(uint64(max(limit, zstd.MinWindowSize))), zstd.WithDecoderMaxMemory(uint64(limit)))
	return d, false, err
}

// releaseZstd drops the decoder's reference to its input and pools it, or
// closes a decoder that was built for one large frame.
func releaseZstd(d *zstd.Decoder, pooled bool) {
	if !pooled {
		d.Close()
		return
	}
	// Reset(nil) only drops the reference to the input; it returns nil.
	_ = d.Reset(nil)
	zstdPooled.Put(d)
}

// zstdError classifies a decoder error: exceeding the window or memory
// limit is ErrDecodeMemory, anything else a malformed payload.
func zstdError(err error) error {
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return fmt.Errorf("%w: zstd: %v", ErrDecodeMemory, err)
	}
	return fmt.Errorf("%w: zstd: %v", ErrRecords, err)
}

// scanner holds one validation's decoding state. It is pooled with its
// window and its gzip and LZ4 readers, which keep only fixed small buffers
// between uses (the LZ4 reader hands its block buffers back to the
// library's pools on Reset).
type scanner struct {
	buf      []byte // the window, cap streamBufSize
	pos, end int
	eof      bool
	total    int // decompressed bytes read so far
	limit    int // Limits.MaxBytes
	name     string
	r        io.Reader
	src      bytes.Reader
	gz       gzip.Reader
	lz       *lz4.Reader
	zd       *zstd.Decoder
	zPooled  bool
	sn       snappyReader
	// keyPrefix and valuePrefix hold the first bytes of a large record's
	// key and value, which is all a control record needs.
	keyPrefix, valuePrefix [8]byte
}

// scanWindow is the window a scanner uses, streamBufSize except in tests
// that make records outgrow it.
var scanWindow = streamBufSize

var scanners = sync.Pool{New: func() any {
	return &scanner{buf: make([]byte, streamBufSize), lz: lz4.NewReader(nil)}
}}

// openScanner prepares a scanner over b's compressed payload under l.
func openScanner(b Batch, l Limits) (*scanner, error) {
	p := b.Payload()
	codec := b.Codec()
	var window int
	switch codec {
	case CodecSnappy:
		if _, err := snappyMaxBlock(p, l); err != nil {
			return nil, err
		}
	case CodecZstd:
		w, err := zstdWindow(p, l)
		if err != nil {
			return nil, err
		}
		window = w
	case CodecGzip, CodecLZ4:
	default:
		return nil, fmt.Errorf("%w: %d", ErrCodec, codec)
	}
	s := scanners.Get().(*scanner)
	s.buf = s.buf[:min(scanWindow, cap(s.buf))]
	s.pos, s.end, s.eof, s.total, s.limit, s.name = 0, 0, false, 0, l.maxBytes(), codec.String()
	s.src.Reset(p)
	switch codec {
	case CodecGzip:
		if err := s.gz.Reset(&s.src); err != nil {
			s.close()
			return nil, fmt.Errorf("%w: gzip: %v", ErrRecords, err)
		}
		s.gz.Multistream(true)
		s.r = &s.gz
	case CodecLZ4:
		s.lz.Reset(&s.src)
		s.r = s.lz
	case CodecSnappy:
		s.sn.reset(p)
		s.r = &s.sn
	case CodecZstd:
		d, pooled, err := zstdDecoder(window, l.maxMemory())
		if err != nil {
			s.close()
			return nil, fmt.Errorf("zstd decoder: %w", err)
		}
		s.zd, s.zPooled = d, pooled
		if err := d.Reset(&s.src); err != nil {
			s.close()
			return nil, zstdError(err)
		}
		s.r = d
	}
	return s, nil
}

// close releases the decoders' references to the payload and pools s.
func (s *scanner) close() {
	if s.zd != nil {
		releaseZstd(s.zd, s.zPooled)
		s.zd = nil
	}
	if s.r == s.lz {
		s.lz.Reset(nil)
	}
	s.sn.reset(nil)
	s.src.Reset(nil)
	s.r = nil
	scanners.Put(s)
}

// fill makes at least need bytes (need <= streamBufSize) available at pos,
// or as many as remain before the end of the stream.
func (s *scanner) fill(need int) error {
	if s.end-s.pos >= need || s.eof {
		return nil
	}
	if s.pos > 0 {
		s.end = copy(s.buf, s.buf[s.pos:s.end])
		s.pos = 0
	}
	for s.end < need && !s.eof {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		s.total += n
		if s.total > s.limit {
			return ErrTooLarge
		}
		if err == io.EOF {
			s.eof = true
		} else if err != nil {
			if s.zd != nil {
				return zstdError(err)
			}
			return fmt.Errorf("%w: %s: %v", ErrRecords, s.name, err)
		}
	}
	return nil
}

// avail returns the buffered bytes not yet consumed.
func (s *scanner) avail() []byte { return s.buf[s.pos:s.end] }

// next decodes the next record. A record that fits in the window is parsed
// there and its key and value alias the window until the next call; a
// larger one is parsed piecewise and carries only the first bytes of its
// key and value (enough for a control record).
func (s *scanner) next(r *Record) error {
	if err := s.fill(binary.MaxVarintLen64); err != nil {
		return err
	}
	size, rest, err := readVarint32(s.avail())
	if err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("record size %d out of range", size)
	}
	s.pos += len(s.avail()) - len(rest)
	if int(size) <= len(s.buf) {
		if err := s.fill(int(size)); err != nil {
			return err
		}
		if s.end-s.pos < int(size) {
			return fmt.Errorf("record size %d out of range", size)
		}
		body := s.buf[s.pos : s.pos+int(size)]
		s.pos += int(size)
		return parseBody(r, body, size)
	}
	return s.bigRecord(r, int64(size))
}

// bigRecord parses a record body of size bytes that does not fit in the
// window, with the checks of parseBody.
func (s *scanner) bigRecord(r *Record, size int64) error {
	left := size
	if err := s.fill(1); err != nil {
		return err
	}
	if len(s.avail()) == 0 {
		return fmt.Errorf("record size %d out of range", size)
	}
	*r = Record{Attributes: int8(s.buf[s.pos])}
	s.pos++
	left--
	var err error
	if r.TimestampDelta, err = s.bodyVarint(&left); err != nil {
		return err
	}
	delta, err := s.bodyVarint(&left)
	if err != nil {
		return err
	}
	if int64(int32(delta)) != delta {
		return fmt.Errorf("varint %d overflows int32", delta)
	}
	r.OffsetDelta = int32(delta)
	if r.Key, err = s.bodyBytes(&left, s.keyPrefix[:0], true); err != nil {
		return err
	}
	if r.Value, err = s.bodyBytes(&left, s.valuePrefix[:0], true); err != nil {
		return err
	}
	n, err := s.bodyVarint(&left)
	if err != nil {
		return err
	}
	if n < 0 || n > left/2 {
		return fmt.Errorf("header count %d out of range", n)
	}
	r.NumHeaders = int(n)
	for range n {
		k, err := s.bodyBytes(&left, nil, false)
		if err != nil {
			return err
		}
		if k == nil {
			return fmt.Errorf("null header key")
		}
		if _, err := s.bodyBytes(&left, nil, false); err != nil {
			return err
		}
	}
	if left != 0 {
		return fmt.Errorf("record size %d leaves %d unread bytes", size, left)
	}
	return nil
}

// bodyVarint reads a varint of the record body, which has left bytes.
func (s *scanner) bodyVarint(left *int64) (int64, error) {
	if err := s.fill(binary.MaxVarintLen64); err != nil {
		return 0, err
	}
	p := s.avail()
	if int64(len(p)) > *left {
		p = p[:*left]
	}
	v, rest, err := readVarint(p)
	if err != nil {
		return 0, err
	}
	n := len(p) - len(rest)
	s.pos += n
	*left -= int64(n)
	return v, nil
}

// bodyBytes reads a varint length and skips that many bytes of the body,
// copying the first ones into prefix when keep is set. It returns nil for a
// null field and a non-nil slice (the prefix, or an empty marker) otherwise.
func (s *scanner) bodyBytes(left *int64, prefix []byte, keep bool) ([]byte, error) {
	n, err := s.bodyVarint(left)
	if err != nil {
		return nil, err
	}
	if n == -1 {
		return nil, nil
	}
	if n < 0 || n > *left || n > 1<<31-1 {
		return nil, fmt.Errorf("length %d out of range", n)
	}
	*left -= n
	if keep {
		if err := s.fill(cap(prefix)); err != nil {
			return nil, err
		}
		prefix = append(prefix, s.avail()[:min(int64(cap(prefix)), n, int64(len(s.avail())))]...)
	}
	for n > 0 {
		if err := s.fill(1); err != nil {
			return nil, err
		}
		a := int64(len(s.avail()))
		if a == 0 {
			return nil, fmt.Errorf("length %d out of range", n)
		}
		step := min(a, n)
		s.pos += int(step)
		n -= step
	}
	if prefix == nil {
		prefix = []byte{}
	}
	return prefix, nil
}

// atEnd reports whether the stream holds no more bytes, reading to its end
// so that the decoders check their trailers (gzip CRC, zstd checksum).
func (s *scanner) atEnd() (int, error) {
	extra := 0
	for {
		extra += s.end - s.pos
		s.pos = s.end
		if s.eof || extra > 0 {
			return extra, nil
		}
		if err := s.fill(1); err != nil {
			return extra, err
		}
	}
}

// maxPooledSnappyBlock is the largest snappy block buffer a pooled scanner
// keeps: a raw block (what franz-go writes) holds a whole batch, and 1 MiB
// covers batches of the default max.message.bytes without a new buffer each
// time.
const maxPooledSnappyBlock = 1 << 20

// snappyReader serves a snappy payload, raw or xerial-framed, one decoded
// block at a time: a block must be whole to be decoded.
type snappyReader struct {
	p      []byte // the rest of the payload
	xerial bool
	out    []byte // the current decoded block
	off    int
	block  []byte // kept for reuse up to maxPooledSnappyBlock
}

func (z *snappyReader) reset(p []byte) {
	z.p, z.out, z.off = p, nil, 0
	z.xerial = bytes.HasPrefix(p, xerialMagic)
	if z.xerial {
		z.p = p[xerialHeaderLen:] // length checked by snappyMaxBlock
	}
	if cap(z.block) > maxPooledSnappyBlock {
		z.block = nil
	}
}

func (z *snappyReader) Read(dst []byte) (int, error) {
	for z.off == len(z.out) {
		if len(z.p) == 0 {
			return 0, io.EOF
		}
		block := z.p
		if z.xerial {
			n := binary.BigEndian.Uint32(z.p) // framing checked by snappyMaxBlock
			block, z.p = z.p[4:4+n], z.p[4+n:]
		} else {
			z.p = nil
		}
		n, err := snappy.DecodedLen(block)
		if err != nil {
			return 0, err
		}
		if cap(z.block) < n {
			z.block = make([]byte, n)
		}
		out, err := snappy.Decode(z.block[:n], block)
		if err != nil {
			return 0, err
		}
		z.out, z.off = out, 0
	}
	n := copy(dst, z.out[z.off:])
	z.off += n
	return n, nil
}
