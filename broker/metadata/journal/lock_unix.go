//go:build unix

package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive advisory lock on <dir>/.lock, as Kafka's
// LogManager locks each log dir, so a second process cannot open the same
// metadata log. The lock lasts until the returned file is closed.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: failed to acquire lock on file .lock in %s. A Cascade instance in another process is using this directory: %w", dir, err)
	}
	return f, nil
}
