//go:build !unix

package log

import (
	"os"
	"path/filepath"
)

// lockDir only creates the ".lock" file where flock is unavailable.
func lockDir(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
}
