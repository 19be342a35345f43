//go:build unix

package log

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes Kafka's exclusive ".lock" file lock on a log dir so two
// brokers never open the same directory (LogManager.lockLogDirs).
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("log dir %s is in use by another process: %w", dir, err)
	}
	return f, nil
}
