//go:build !unix

package handler

// diskSpace reports the sizes as unknown (-1) where statfs is unavailable.
func diskSpace(dir string) (total, usable int64) { return -1, -1 }
