package record

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// ErrDecodeMemory reports a compressed payload whose decoder would need more
// memory than Limits.MaxMemory allows: a zstd frame declaring a window
// larger than the limit (zstd-jni, which Kafka uses, refuses frames beyond
// its 128 MiB window limit in the same way), or a snappy block declaring a
// larger decoded length.
var ErrDecodeMemory = errors.New("record: compressed payload needs more decoding memory than the limit")

const (
	// DefaultMaxDecodeMemory is the default Limits.MaxMemory: zstd's own
	// default window limit (ZSTD_WINDOWLOG_LIMIT_DEFAULT, 2^27), which
	// zstd-jni applies to every frame Kafka decompresses.
	DefaultMaxDecodeMemory = 128 << 20
	// DefaultMaxDecompressedBytes is the default cap of the size a
	// compressed batch may inflate to (the log's MaxDecompressedBytes).
	DefaultMaxDecompressedBytes = 128 << 20

	// streamBufSize is the window of decompressed bytes that validation
	// holds at a time; larger records are parsed through it in pieces.
	streamBufSize = 64 << 10

	// gzipMemory bounds a flate decoder's state: a 32 KiB window, Huffman
	// tables and the reader structs.
	gzipMemory = 64 << 10

	// zstdBlockSpace is what klauspost/compress's streaming decoder keeps
	// beside the window: two blocks of at most 128 KiB plus its copy
	// overrun, and its literal and sequence buffers.
	zstdBlockSpace = 2*(128<<10+64) + 192<<10

	// lz4MaxBlock is the largest block an LZ4 frame may declare (4 MiB);
	// the reader holds one decoded block and one compressed block.
	lz4MaxBlock = 4 << 20
)

// Limits bounds what decoding one batch's records may use.
type Limits struct {
	// MaxBytes caps the decompressed size of the records; a larger
	// payload is refused with ErrTooLarge. Zero means
	// DefaultMaxDecompressedBytes.
	MaxBytes int
	// MaxMemory caps the decoder state one validation may hold: a zstd
	// window, a snappy block. Zero means DefaultMaxDecodeMemory. A payload
	// needing more is refused with ErrDecodeMemory before anything is
	// allocated for it.
	MaxMemory int
}

func (l Limits) maxBytes() int {
	if l.MaxBytes <= 0 {
		return DefaultMaxDecompressedBytes
	}
	return l.MaxBytes
}

func (l Limits) maxMemory() int {
	if l.MaxMemory <= 0 {
		return DefaultMaxDecodeMemory
	}
	return l.MaxMemory
}

// Bound returns the most memory any one validation under l may hold while it
// decodes, whatever the batch: the record window plus the largest decoder
// state the limits admit (a zstd window of MaxMemory with its block space,
// or an LZ4 frame's two 4 MiB blocks). A caller that budgets memory per
// request may reserve this for each batch it validates at once.
func (l Limits) Bound() int {
	return streamBufSize + max(l.maxMemory()+zstdBlockSpace, 2*lz4MaxBlock)
}

// DecodeMemory returns the memory validating b's records will hold at its
// peak, read from the compression headers without decompressing anything:
// the record window plus the decoder state the payload declares (zstd
// window, LZ4 block size, snappy block lengths, gzip's fixed window). It
// returns ErrDecodeMemory or ErrTooLarge when the headers already exceed l,
// as validation would. For an uncompressed batch it is zero: its records are
// read in place.
func (b Batch) DecodeMemory(l Limits) (int, error) {
	p := b.Payload()
	switch b.Codec() {
	case CodecNone:
		return 0, nil
	case CodecGzip:
		return streamBufSize + gzipMemory, nil
	case CodecLZ4:
		return streamBufSize + 2*lz4BlockSize(p), nil
	case CodecSnappy:
		n, err := snappyMaxBlock(p, l)
		return streamBufSize + n, err
	case CodecZstd:
		w, err := zstdWindow(p, l)
		return streamBufSize + w + zstdBlockSpace, err
	}
	return 0, fmt.Errorf("%w: %d", ErrCodec, b.Codec())
}

// lz4BlockSize returns the block maximum size an LZ4 frame descriptor
// declares (its BD byte), or the largest possible when the descriptor
// cannot be read; the decoder refuses such a frame anyway.
func lz4BlockSize(p []byte) int {
	if len(p) < 6 || binary.LittleEndian.Uint32(p) != 0x184D2204 {
		return lz4MaxBlock
	}
	switch (p[5] >> 4) & 7 {
	case 4:
		return 64 << 10
	case 5:
		return 256 << 10
	case 6:
		return 1 << 20
	}
	return lz4MaxBlock
}

// snappyMaxBlock returns the largest decoded length among the payload's
// snappy blocks: the whole payload for a raw block, each chunk for xerial
// framing. Decoding holds one block at a time.
func snappyMaxBlock(p []byte, l Limits) (int, error) {
	if len(p) < len(xerialMagic) || string(p[:len(xerialMagic)]) != string(xerialMagic) {
		return snappyBlockLen(p, l)
	}
	if len(p) < xerialHeaderLen {
		return 0, fmt.Errorf("%w: short xerial header", ErrRecords)
	}
	largest := 0
	for p = p[xerialHeaderLen:]; len(p) > 0; {
		if len(p) < 4 {
			return 0, fmt.Errorf("%w: truncated xerial chunk length", ErrRecords)
		}
		n := binary.BigEndian.Uint32(p)
		p = p[4:]
		if uint64(n) > uint64(len(p)) {
			return 0, fmt.Errorf("%w: xerial chunk of %d bytes exceeds payload", ErrRecords, n)
		}
		d, err := snappyBlockLen(p[:n], l)
		if err != nil {
			return 0, err
		}
		largest = max(largest, d)
		p = p[n:]
	}
	return largest, nil
}

// snappyBlockLen returns a snappy block's declared decoded length, refused
// when beyond either limit.
func snappyBlockLen(block []byte, l Limits) (int, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return 0, fmt.Errorf("%w: snappy: %v", ErrRecords, err)
	}
	if n > l.maxBytes() {
		return 0, ErrTooLarge
	}
	if n > l.maxMemory() {
		return 0, fmt.Errorf("%w: snappy block of %d bytes, limit %d", ErrDecodeMemory, n, l.maxMemory())
	}
	return n, nil
}

// zstdWindow returns the largest window the payload's zstd frames declare
// (a single-segment frame's window is its content size), found by walking
// the frame and block headers without decoding anything. A window beyond
// l.MaxMemory is ErrDecodeMemory and content sizes adding up past
// l.MaxBytes are ErrTooLarge, both before a window is allocated.
func zstdWindow(p []byte, l Limits) (int, error) {
	most, content := uint64(zstd.MinWindowSize), uint64(0)
	for len(p) > 0 {
		var h zstd.Header
		rest, err := h.DecodeAndStrip(p)
		if err != nil {
			return 0, fmt.Errorf("%w: zstd: %v", ErrRecords, err)
		}
		if h.Skippable {
			if uint64(h.SkippableSize) > uint64(len(rest)) {
				return 0, fmt.Errorf("%w: zstd: truncated skippable frame", ErrRecords)
			}
			p = rest[h.SkippableSize:]
			continue
		}
		if h.HasFCS {
			if content += h.FrameContentSize; content > uint64(l.maxBytes()) || content < h.FrameContentSize {
				return 0, ErrTooLarge
			}
		}
		w := h.WindowSize
		if h.SingleSegment {
			w = h.FrameContentSize
		}
		if w > uint64(l.maxMemory()) {
			return 0, fmt.Errorf("%w: zstd window of %d bytes, limit %d", ErrDecodeMemory, w, l.maxMemory())
		}
		most = max(most, w)
		if p, err = skipZstdBlocks(p[h.HeaderSize:], h.HasCheckSum); err != nil {
			return 0, err
		}
	}
	return int(most), nil
}

// skipZstdBlocks returns what follows the blocks (and checksum) of a frame
// whose header has been read.
func skipZstdBlocks(p []byte, checksum bool) ([]byte, error) {
	for {
		if len(p) < 3 {
			return nil, fmt.Errorf("%w: zstd: truncated block header", ErrRecords)
		}
		bh := uint32(p[0]) | uint32(p[1])<<8 | uint32(p[2])<<16
		size := int(bh >> 3)
		switch (bh >> 1) & 3 {
		case 1: // RLE: one byte repeated size times
			size = 1
		case 3:
			return nil, fmt.Errorf("%w: zstd: reserved block type", ErrRecords)
		}
		if p = p[3:]; size > len(p) {
			return nil, fmt.Errorf("%w: zstd: block of %d bytes exceeds payload", ErrRecords, size)
		}
		p = p[size:]
		if bh&1 == 1 {
			break
		}
	}
	if checksum {
		if len(p) < 4 {
			return nil, fmt.Errorf("%w: zstd: truncated checksum", ErrRecords)
		}
		p = p[4:]
	}
	return p, nil
}

// SetDecodeMemory returns the most DecodeMemory of any batch of a record
// set: what validating the set holds at its peak, since its batches are
// validated one after another. A malformed set, or a batch past the limits,
// returns the error validation would.
func SetDecodeMemory(set []byte, l Limits) (int, error) {
	most := 0
	for len(set) > 0 {
		b, rest, err := Next(set)
		if err != nil {
			return most, err
		}
		if len(b) > HeaderSize && b.Magic() == 2 {
			n, err := b.DecodeMemory(l)
			if err != nil {
				return most, err
			}
			most = max(most, n)
		}
		set = rest
	}
	return most, nil
}
