//go:build unix

package log

import "syscall"

// softFileLimit returns the process's soft RLIMIT_NOFILE, or 1024 when it
// cannot be read.
func softFileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 1024
	}
	return r.Cur
}
