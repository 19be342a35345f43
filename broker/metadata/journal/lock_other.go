//go:build !unix

package journal

import "os"

// lockDir takes no lock where flock is unavailable.
func lockDir(dir string) (*os.File, error) { return nil, nil }
