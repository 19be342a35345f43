//go:build !unix

package wire

// setRecvBuffer leaves the listening socket's buffer to the OS where
// Cascade has no portable setsockopt; tuneConn still sets it on each
// accepted connection.
func setRecvBuffer(fd uintptr, n int) error { return nil }
