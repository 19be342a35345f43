package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// FileName is the journal's file name inside its directory.
const FileName = "metadata.journal"

// MaxFrame bounds one frame's payload, so a corrupt length never allocates
// more than this.
const MaxFrame = 64 << 20

const header = "CSCDMJ01"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrNotReplayed is returned by Append before Replay has run.
var ErrNotReplayed = errors.New("journal: append before replay")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("journal: closed")

// File is an open journal. Its methods are safe for concurrent use.
type File struct {
	mu        sync.Mutex
	dir, path string
	f         *os.File
	lock      *os.File // holds <dir>/.lock; nil where locks are unsupported
	size      int64    // bytes of valid frames (and header)
	replayed  bool
	err       error // sticky: a failed append that could not be undone
	// Truncated is how many bytes Replay cut off the tail.
	Truncated int64
}

// Open opens or creates the journal in dir, creating dir if needed.
func Open(dir string) (*File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		closeLock(lock)
		return nil, fmt.Errorf("journal: %w", err)
	}
	j := &File{dir: dir, path: path, f: f, lock: lock}
	st, err := f.Stat()
	if err != nil {
		j.Close()
		return nil, fmt.Errorf("journal: %w", err)
	}
	if st.Size() < int64(len(header)) {
		// New, or torn while writing the header: start over.
		if err := j.writeHeader(); err != nil {
			j.Close()
			return nil, err
		}
	} else {
		var h [len(header)]byte
		if _, err := f.ReadAt(h[:], 0); err != nil {
			j.Close()
			return nil, fmt.Errorf("journal: reading header: %w", err)
		}
		if string(h[:]) != header {
			j.Close()
			return nil, fmt.Errorf("journal: %s is not a Cascade metadata journal", path)
		}
	}
	return j, nil
}

func (j *File) writeHeader() error {
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if _, err := j.f.WriteAt([]byte(header), 0); err != nil {
		return fmt.Errorf("journal: writing header: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return syncDir(j.dir)
}

// Replay calls fn with every frame's payload in order. At the first torn
// or corrupt frame it truncates the file there (recording the bytes cut in
// Truncated) and stops. An error from fn stops the replay and is returned.
func (j *File) Replay(fn func(batch []byte) error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return ErrClosed
	}
	st, err := j.f.Stat()
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	end := st.Size()
	r := bufio.NewReaderSize(io.NewSectionReader(j.f, int64(len(header)), end-int64(len(header))), 1<<16)
	pos := int64(len(header))
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			break // clean end, or a torn frame header
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		sum := binary.BigEndian.Uint32(hdr[4:])
		if n > MaxFrame || int64(n) > end-pos-8 {
			break // torn or corrupt length
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			break
		}
		if crc32.Checksum(payload, castagnoli) != sum {
			break
		}
		if err := fn(payload); err != nil {
			return err
		}
		pos += 8 + int64(n)
	}
	if pos < end {
		if err := j.f.Truncate(pos); err != nil {
			return fmt.Errorf("journal: truncating torn tail: %w", err)
		}
		if err := j.f.Sync(); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		j.Truncated = end - pos
	}
	j.size = pos
	j.replayed = true
	return nil
}

// Append writes one frame and fsyncs it; when Append returns nil the frame
// survives a crash. On a failed write the file is cut back to its previous
// size; if even that fails the journal refuses all later appends.
func (j *File) Append(batch []byte) error {
	if len(batch) > MaxFrame {
		return fmt.Errorf("journal: batch of %d bytes exceeds %d", len(batch), MaxFrame)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.f == nil:
		return ErrClosed
	case !j.replayed:
		return ErrNotReplayed
	case j.err != nil:
		return j.err
	}
	frame := make([]byte, 8+len(batch))
	binary.BigEndian.PutUint32(frame[:4], uint32(len(batch)))
	binary.BigEndian.PutUint32(frame[4:8], crc32.Checksum(batch, castagnoli))
	copy(frame[8:], batch)
	_, err := j.f.WriteAt(frame, j.size)
	if err == nil {
		err = j.f.Sync()
	}
	if err != nil {
		if terr := j.f.Truncate(j.size); terr != nil {
			j.err = fmt.Errorf("journal: append failed (%v) and could not be undone: %w", err, terr)
		}
		return fmt.Errorf("journal: append: %w", err)
	}
	j.size += int64(len(frame))
	return nil
}

// Size returns the journal's length in bytes.
func (j *File) Size() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.size
}

// Rewrite atomically replaces the journal's contents with batches: the
// compaction of a log whose image is now smaller than its history.
func (j *File) Rewrite(batches [][]byte) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return ErrClosed
	}
	tmp := j.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	w := bufio.NewWriter(f)
	size := int64(len(header))
	_, err = w.WriteString(header)
	for _, b := range batches {
		if err != nil {
			break
		}
		if len(b) > MaxFrame {
			err = fmt.Errorf("batch of %d bytes exceeds %d", len(b), MaxFrame)
			break
		}
		var hdr [8]byte
		binary.BigEndian.PutUint32(hdr[:4], uint32(len(b)))
		binary.BigEndian.PutUint32(hdr[4:], crc32.Checksum(b, castagnoli))
		if _, err = w.Write(hdr[:]); err == nil {
			_, err = w.Write(b)
		}
		size += 8 + int64(len(b))
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = os.Rename(tmp, j.path)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("journal: rewrite: %w", err)
	}
	if err := syncDir(j.dir); err != nil {
		f.Close()
		return err
	}
	j.f.Close()
	j.f = f
	j.size = size
	j.replayed = true
	j.err = nil
	return nil
}

// Close closes the file and releases the directory lock.
func (j *File) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	closeLock(j.lock)
	j.lock = nil
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

func closeLock(f *os.File) {
	if f != nil {
		f.Close() // closing the descriptor releases the flock
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("journal: syncing %s: %w", dir, err)
	}
	return nil
}
