package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"net"
	"os"
	"path/filepath"
	"time"
)

// Limits are the hardware's own figures, measured in the same run as the
// brokers so that a broker's throughput can be read as a fraction of them.
type Limits struct {
	// Dir is where the disk probe wrote: the directory holding the
	// brokers' data dirs.
	Dir string `json:"disk_dir"`
	// DiskWriteBytesPerS is sequential 1 MiB writes followed by one fsync,
	// timed to the end of the fsync: what the disk sustains.
	DiskWriteBytesPerS float64 `json:"disk_write_bytes_per_s"`
	// DiskWriteNoSyncBytesPerS is the same writes without the fsync: what
	// the page cache accepts.
	DiskWriteNoSyncBytesPerS float64 `json:"disk_write_nosync_bytes_per_s"`
	// DiskWriteSyncEveryBytesPerS is the same writes with an fsync after
	// every SyncEveryBytes and at the end: a log flushed as it is written.
	DiskWriteSyncEveryBytesPerS float64 `json:"disk_write_sync_every_bytes_per_s"`
	SyncEveryBytes              int64   `json:"disk_sync_every_bytes"`
	// LoopbackBytesPerS is one TCP connection on 127.0.0.1 streaming
	// 1 MiB writes to a reader that discards them.
	LoopbackBytesPerS float64 `json:"loopback_bytes_per_s"`
	// Samples is the number of rounds the figures are the median of.
	Samples int `json:"samples"`
}

const probeChunk = 1 << 20

// diskWrite writes size bytes sequentially to a new file in dir, with an
// fsync after every syncEvery bytes (0: none on the way) and, if sync, at
// the end, and returns bytes per second. The file is
// removed afterwards. The data is random so no filesystem compression or
// deduplication helps.
func diskWrite(ctx context.Context, dir string, size, syncEvery int64, sync bool) (float64, error) {
	f, err := os.CreateTemp(dir, "cascade-bench-disk-probe-")
	if err != nil {
		return 0, fmt.Errorf("disk probe: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, probeChunk)
	for i := 0; i+8 <= len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], mix64(uint64(i)))
	}
	start := time.Now()
	var n int64
	for n < size {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		buf[0], buf[1] = byte(n>>20), byte(n>>28) // Every chunk differs.
		w, err := f.Write(buf)
		n += int64(w)
		if err != nil {
			return 0, fmt.Errorf("disk probe write: %w", err)
		}
		if syncEvery > 0 && n%syncEvery < int64(w) && n < size {
			if err := f.Sync(); err != nil {
				return 0, fmt.Errorf("disk probe fsync: %w", err)
			}
		}
	}
	if sync {
		if err := f.Sync(); err != nil {
			return 0, fmt.Errorf("disk probe fsync: %w", err)
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// loopback streams size bytes over one TCP connection on 127.0.0.1 and
// returns bytes per second, stopping early after maxTime.
func loopback(ctx context.Context, size int64, maxTime time.Duration) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- 0
			return
		}
		defer c.Close()
		buf := make([]byte, probeChunk)
		var n int64
		for {
			r, err := c.Read(buf)
			n += int64(r)
			if err != nil {
				got <- n
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	buf := make([]byte, probeChunk)
	start := time.Now()
	deadline := start.Add(maxTime)
	var sent int64
	for sent < size && time.Now().Before(deadline) && ctx.Err() == nil {
		w, err := c.Write(buf)
		sent += int64(w)
		if err != nil {
			c.Close()
			return 0, fmt.Errorf("loopback probe: %w", err)
		}
	}
	c.Close()
	var n int64
	select {
	case n = <-got:
	case <-time.After(10 * time.Second):
		return 0, errors.New("loopback probe: reader did not finish")
	}
	if n != sent {
		return 0, fmt.Errorf("loopback probe: sent %d bytes, received %d", sent, n)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// DefaultSyncEveryBytes is how often the disk probe's flushed pass
// fsyncs by default.
const DefaultSyncEveryBytes = 16 << 20

// measureLimits runs the probes once: disk writes without fsync, with one
// at the end, and with one every syncEvery bytes; loopback TCP.
func measureLimits(ctx context.Context, dir string, diskBytes, syncEvery int64) (Limits, error) {
	if syncEvery <= 0 {
		syncEvery = DefaultSyncEveryBytes
	}
	l := Limits{Dir: dir, Samples: 1, SyncEveryBytes: syncEvery}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return l, err
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		l.Dir = abs
	}
	// The first write into a cold page cache runs at a fraction of the
	// speed of later ones (page allocation), which no broker pays in steady
	// state; one untimed pass warms it.
	if _, err = diskWrite(ctx, dir, diskBytes, 0, false); err != nil {
		return l, err
	}
	if l.DiskWriteNoSyncBytesPerS, err = diskWrite(ctx, dir, diskBytes, 0, false); err != nil {
		return l, err
	}
	if l.DiskWriteBytesPerS, err = diskWrite(ctx, dir, diskBytes, 0, true); err != nil {
		return l, err
	}
	if l.DiskWriteSyncEveryBytesPerS, err = diskWrite(ctx, dir, diskBytes, syncEvery, true); err != nil {
		return l, err
	}
	if l.LoopbackBytesPerS, err = loopback(ctx, 4*diskBytes, 5*time.Second); err != nil {
		return l, err
	}
	return l, nil
}
