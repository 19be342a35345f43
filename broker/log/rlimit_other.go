//go:build !unix

package log

// softFileLimit returns 1024 where RLIMIT_NOFILE does not exist.
func softFileLimit() uint64 { return 1024 }
