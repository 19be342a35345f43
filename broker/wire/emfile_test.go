//go:build linux

package wire

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestAcceptRecoversFromEMFILE fills the process's descriptor table so that
// the listener's accept fails with EMFILE while a client waits in the
// backlog, then frees the descriptors and checks that the listener took the
// client after all and serves it: a failing accept backs off and retries,
// as net/http's Server, instead of stopping the listener for good.
func TestAcceptRecoversFromEMFILE(t *testing.T) {
	obs := &countObserver{}
	s := &Server{Dispatcher: &serveDispatcher{}, Observer: obs}
	addr := startWith(t, s)
	warm := dialT(t, addr) // the server's accept loop is running
	answeredWithin(t, warm, apiVersionsFrame(1), 2*time.Second)

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	probe, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	highest := probe.Fd()
	probe.Close()
	lim := old
	lim.Cur = uint64(highest) + 64
	if lim.Cur > old.Max {
		t.Skip("hard descriptor limit too low")
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	var fill []*os.File
	release := func() {
		for _, f := range fill {
			f.Close()
		}
		fill = nil
	}
	defer release()
	for range 256 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		fill = append(fill, f)
	}
	if len(fill) == 0 || len(fill) == 256 {
		t.Fatalf("filled %d descriptors", len(fill))
	}
	// One descriptor for the client; the server's accept then has none.
	fill[len(fill)-1].Close()
	fill = fill[:len(fill)-1]
	c, err := netDial(addr)
	if err != nil {
		t.Fatalf("dial with one descriptor free: %v", err)
	}
	defer c.Close()
	if _, err := c.Write(apiVersionsFrame(2)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // accept fails meanwhile
	release()
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := ReadFrame(c, 1<<20); err != nil {
		t.Fatalf("listener did not recover from EMFILE: %v", err)
	}
	if obs.count("accept error") == 0 {
		t.Fatal("no failed accept observed: the descriptor table was not full")
	}
}
