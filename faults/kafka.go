package faults

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cascade-kafka/cascade/matrix/apachekafka"
)

// Kafka is Apache Kafka (the oracle, started by matrix/apachekafka) as a
// Target. Crash kills it with SIGKILL and restarts it on the same log dir,
// ports and configuration, so the suite crashes the oracle as it crashes
// Cascade.
type Kafka struct{ Broker *apachekafka.Broker }

// Addr implements Target.
func (k Kafka) Addr() string { return k.Broker.Addr() }

// Crash implements Target: SIGKILL, a marker line in the broker's log, and
// a restart that waits until the broker answers Metadata again.
func (k Kafka) Crash(ctx context.Context) error {
	if err := k.Broker.Kill(); err != nil {
		return err
	}
	if err := appendLine(k.Broker.LogPath(), fmt.Sprintf("=== kill -9 at %s; restarting", time.Now().Format(time.RFC3339Nano))); err != nil {
		return err
	}
	return k.Broker.Restart(ctx)
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteListing writes one line per file under dir (size in bytes and path
// relative to dir), an artifact that shows which segments, indexes and
// snapshots a broker left behind.
func WriteListing(w io.Writer, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, rerr := filepath.Rel(dir, p)
		if rerr != nil {
			return rerr
		}
		if d.IsDir() {
			_, err = fmt.Fprintf(w, "%12s  %s/\n", "", rel)
			return err
		}
		info, ierr := d.Info()
		if ierr != nil {
			return ierr
		}
		_, err = fmt.Fprintf(w, "%12d  %s\n", info.Size(), rel)
		return err
	})
}
