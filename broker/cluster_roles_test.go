package broker

import (
	"context"
	"net"
	"testing"
)

// TestDialRefused checks the process-gone probe's dial: a port nobody
// listens on is refused, a listening one is not.
func TestDialRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if dialRefused(context.Background(), nil, ln.Addr().String()) {
		t.Fatal("a listening port reads as refused")
	}
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := gone.Addr().String()
	gone.Close()
	if !dialRefused(context.Background(), nil, addr) {
		t.Fatal("a closed port does not read as refused")
	}
}
