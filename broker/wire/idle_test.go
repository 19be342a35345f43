package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/internal/zerocopy"
)

// fileBody is a response body that writes a section of a file the way a
// Fetch response's log regions do when the writer is not a *net.TCPConn:
// io.Copy of an *io.SectionReader.
type fileBody struct {
	f      *os.File
	off, n int64
}

func (b fileBody) Len() int { return int(b.n) }
func (b fileBody) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, io.NewSectionReader(b.f, b.off, b.n))
}
func (fileBody) Release() {}

// fileDispatcher answers every request with the same file section.
type fileDispatcher struct{ body fileBody }

func (d fileDispatcher) Dispatch(ctx context.Context, req *Request) (Response, error) {
	return Response{Body: d.body}, nil
}

// openConns returns the connections the server still holds.
func openConns(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// testFile writes n bytes of a repeating pattern to a temporary file and
// returns it open with its contents.
func testFile(t *testing.T, n int) (*os.File, []byte) {
	t.Helper()
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "segment")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, data
}

// TestStalledReaderExpires checks that a client which sends a request with
// a large response and then reads nothing is closed after about
// connections.max.idle.ms, as Kafka's Selector closes a channel whose send
// makes no progress, both for a response written from memory and for one
// spliced from a file.
func TestStalledReaderExpires(t *testing.T) {
	const idle = 200 * time.Millisecond
	f, _ := testFile(t, 16<<20)
	for _, tc := range []struct {
		name string
		d    Dispatcher
	}{
		{"memory", bigDispatcher{16 << 20}},
		{"file", fileDispatcher{fileBody{f: f, off: 0, n: 16 << 20}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := Listen(context.Background(), "127.0.0.1:0", -1)
			if err != nil {
				t.Fatal(err)
			}
			obs := &countObserver{}
			s := &Server{Dispatcher: tc.d, IdleTimeout: idle, SendBufferBytes: 16 << 10, Observer: obs}
			go s.Serve(ln)
			defer s.Close()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.(*net.TCPConn).SetReadBuffer(16 << 10)
			for openConns(s) == 0 {
				time.Sleep(time.Millisecond)
			}
			req := kmsg.NewPtrApiVersionsRequest()
			req.SetVersion(3)
			start := time.Now()
			if _, err := c.Write(frameOf(encodeRequest(req, 1, nil))); err != nil {
				t.Fatal(err)
			}
			for openConns(s) != 0 {
				if time.Since(start) > 10*idle {
					t.Fatalf("connection still open %v after the client stopped reading (idle %v)", time.Since(start), idle)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if d := time.Since(start); d < idle {
				t.Fatalf("connection closed after %v, before the idle timeout %v", d, idle)
			}
			if n := obs.count("closed write_idle"); n != 1 {
				t.Fatalf("observed %v", obs.counts)
			}
		})
	}
}

// TestFileSectionSlowReader checks that a file section reaches a client
// that reads it slowly intact, through sendfile where available, and that
// the connection is not closed as idle while bytes move.
func TestFileSectionSlowReader(t *testing.T) {
	const idle = 200 * time.Millisecond
	const off, size = 12345, 1 << 20
	f, data := testFile(t, off+size+100)
	ln, err := Listen(context.Background(), "127.0.0.1:0", -1)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Dispatcher: fileDispatcher{fileBody{f: f, off: off, n: size}}, IdleTimeout: idle, SendBufferBytes: 16 << 10}
	go s.Serve(ln)
	defer s.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(32 << 10)
	c.SetDeadline(time.Now().Add(15 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	start := time.Now()
	before := zerocopy.Sent()
	if _, err := c.Write(frameOf(encodeRequest(req, 1, nil))); err != nil {
		t.Fatal(err)
	}
	var hdr [8]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatal(err)
	}
	if n := binary.BigEndian.Uint32(hdr[:]); n != size+4 {
		t.Fatalf("frame of %d", n)
	}
	got := make([]byte, 0, size)
	buf := make([]byte, 16<<10)
	for len(got) < size {
		n, err := c.Read(buf[:min(len(buf), size-len(got))])
		if err != nil {
			t.Fatalf("after %d bytes in %v: %v", len(got), time.Since(start), err)
		}
		got = append(got, buf[:n]...)
		time.Sleep(10 * time.Millisecond)
	}
	if time.Since(start) < 2*idle {
		t.Fatalf("response read in %v, too fast to test idleness", time.Since(start))
	}
	if !bytes.Equal(got, data[off:off+size]) {
		t.Fatal("file section corrupted on the wire")
	}
	if sent := zerocopy.Sent() - before; runtime.GOOS == "linux" && sent != size {
		t.Fatalf("sendfile carried %d bytes, want %d", sent, size)
	}
}

// TestProgressWriterResumesSection checks that ReadFrom sends the unread
// rest of a section reader, not the whole section.
func TestProgressWriterResumesSection(t *testing.T) {
	f, data := testFile(t, 300<<10)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	w := &progressWriter{c: a, idle: time.Second, act: &activity{}}
	sr := io.NewSectionReader(f, 1000, 200<<10)
	if _, err := sr.Seek(500, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	done := make(chan []byte)
	go func() {
		got, _ := io.ReadAll(b)
		done <- got
	}()
	w.begin()
	n, err := w.ReadFrom(sr)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	got := <-done
	if want := data[1500 : 1000+200<<10]; n != int64(len(want)) || !bytes.Equal(got, want) {
		t.Fatalf("sent %d bytes (%d received), want %d", n, len(got), len(want))
	}
}
