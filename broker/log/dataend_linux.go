package log

import (
	"errors"
	"os"
	"syscall"
)

// lseek(2) whence values for sparse files (linux/fs.h).
const (
	seekData = 3
	seekHole = 4
)

// dataEnd returns an offset at or after the end of the last data extent of
// f within its first size bytes: every byte from it up to size lies in a
// hole and reads as zero. It walks extents with SEEK_DATA and SEEK_HOLE, so
// a preallocated (sparse) index left by a crash is not read to find its
// last entry. When the file system cannot tell, it returns size.
func dataEnd(f *os.File, size int64) int64 {
	end := int64(0)
	for off := int64(0); off < size; {
		d, err := f.Seek(off, seekData)
		if errors.Is(err, syscall.ENXIO) {
			break // no data at or after off
		}
		if err != nil {
			return size
		}
		h, err := f.Seek(d, seekHole)
		if err != nil || h <= d {
			return size
		}
		end, off = h, h
	}
	return min(end, size)
}
