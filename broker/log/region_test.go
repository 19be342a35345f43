package log

import (
	"bytes"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"

	"github.com/cascade-kafka/cascade/broker/internal/zerocopy"
)

// TestRegionSendfile sends regions over a real loopback TCP connection from
// several goroutines at once; each must receive exactly its bytes.
func TestRegionSendfile(t *testing.T) {
	c := newFakeClock()
	m, l := openTest(t, t.TempDir(), c, DefaultConfig())
	defer m.Close()
	for i := 0; i < 200; i++ {
		if _, err := l.Append(batch(t, 20, "sf", int64(i)), 0); err != nil {
			t.Fatal(err)
		}
	}
	want := bytes.Buffer{}
	all, _ := l.Read(0, 1<<30, 1<<62, true)
	all.Regions[0].WriteTo(&want)
	all.Regions[0].Release()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	before := zerocopy.Sent()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Error(err)
				return
			}
			res, err := l.Read(0, 1<<30, 1<<62, true)
			if err != nil {
				t.Error(err)
				return
			}
			n, err := res.Regions[0].WriteTo(conn.(*net.TCPConn))
			res.Regions[0].Release()
			if err != nil || n != int64(want.Len()) {
				t.Errorf("sendfile wrote %d of %d: %v", n, want.Len(), err)
			}
			conn.Close()
		}()
		srv, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := io.ReadAll(srv)
			if err != nil || !bytes.Equal(got, want.Bytes()) {
				t.Errorf("received %d bytes (want %d), err %v", len(got), want.Len(), err)
			}
			srv.Close()
		}()
	}
	wg.Wait()
	if runtime.GOOS == "linux" && zerocopy.Sent()-before != int64(4*want.Len()) {
		t.Fatalf("sendfile carried %d bytes, want %d", zerocopy.Sent()-before, 4*want.Len())
	}
}
