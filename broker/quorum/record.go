package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Record framing of the files in the quorum directory: a record is a
// big-endian uint32 payload length, a big-endian uint32 CRC-32C of the
// payload, then the payload, whose first byte is the record kind. The same
// framing is used by the metadata journal; a torn tail (a record cut short
// by a crash) is truncated on open, a complete record whose checksum fails
// anywhere but at the tail is corruption.

// recordHeaderLen is the length of a record's length and checksum.
const recordHeaderLen = 8

// maxRecordLen bounds one record's payload. The decoder refuses a larger
// length before allocating anything, so a damaged length cannot make Open
// allocate what it announces.
const maxRecordLen = 256 << 20

// Record kinds.
const (
	// kindBase opens every log file: the index and term of the entry just
	// before the file's first entry (the compaction point).
	kindBase byte = 1
	// kindEntry is one marshalled raftpb.Entry. An entry whose index is not
	// after the last one replaces the suffix from that index on, which is
	// how raft overwriting an uncommitted suffix is made durable.
	kindEntry byte = 2
	// kindHardState is one marshalled raftpb.HardState; the last one wins.
	kindHardState byte = 3
	// kindSnapshot is one marshalled raftpb.Snapshot, the only record of the
	// snapshot file.
	kindSnapshot byte = 4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt reports a quorum file that is damaged other than by a torn
// tail: a complete record with a bad checksum followed by more data, an
// impossible length, an unknown kind, or records out of order.
var ErrCorrupt = errors.New("quorum: corrupt file")

// record is one decoded record.
type record struct {
	kind byte
	data []byte // aliases the decoded buffer
}

// appendRecord appends the framed record of kind and data to b.
func appendRecord(b []byte, kind byte, data []byte) []byte {
	var h [recordHeaderLen + 1]byte
	binary.BigEndian.PutUint32(h[0:4], uint32(len(data)+1))
	crc := crc32.Update(0, crcTable, []byte{kind})
	crc = crc32.Update(crc, crcTable, data)
	binary.BigEndian.PutUint32(h[4:8], crc)
	h[8] = kind
	b = append(b, h[:]...)
	return append(b, data...)
}

// decodeRecords decodes the records in b. It returns the records and the
// length of the valid prefix; valid < len(b) with a nil error means the
// tail from valid on is torn and should be truncated.
func decodeRecords(b []byte) (recs []record, valid int, err error) {
	off := 0
	for off < len(b) {
		rest := b[off:]
		if len(rest) < recordHeaderLen {
			return recs, off, nil // torn header
		}
		n := binary.BigEndian.Uint32(rest[0:4])
		if n == 0 || n > maxRecordLen {
			if allZero(rest) {
				// A crash after the file grew but before the data reached
				// it leaves zeros, as Kafka's log recovery also accepts.
				return recs, off, nil
			}
			return recs, off, fmt.Errorf("%w: record at offset %d has length %d", ErrCorrupt, off, n)
		}
		end := recordHeaderLen + int(n)
		if end > len(rest) {
			return recs, off, nil // torn payload
		}
		payload := rest[recordHeaderLen:end]
		if crc32.Checksum(payload, crcTable) != binary.BigEndian.Uint32(rest[4:8]) {
			if end == len(rest) || allZero(rest[end:]) {
				return recs, off, nil // the last record was torn
			}
			return recs, off, fmt.Errorf("%w: record at offset %d fails its checksum", ErrCorrupt, off)
		}
		recs = append(recs, record{kind: payload[0], data: payload[1:]})
		off += end
	}
	return recs, off, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// encodeBase encodes a base record's index and term.
func encodeBase(index, term uint64) []byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], index)
	binary.BigEndian.PutUint64(b[8:16], term)
	return b[:]
}

func decodeBase(b []byte) (index, term uint64, err error) {
	if len(b) != 16 {
		return 0, 0, fmt.Errorf("%w: base record of %d bytes", ErrCorrupt, len(b))
	}
	return binary.BigEndian.Uint64(b[0:8]), binary.BigEndian.Uint64(b[8:16]), nil
}
