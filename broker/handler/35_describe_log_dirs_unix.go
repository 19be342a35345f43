//go:build unix

package handler

import "syscall"

// diskSpace returns the total and usable bytes of the filesystem holding
// dir, or -1s when it cannot be read (Kafka's "unknown").
func diskSpace(dir string) (total, usable int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1, -1
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize)
}
