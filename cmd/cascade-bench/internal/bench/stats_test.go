package bench

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func FuzzParsePayload(f *testing.F) {
	good := make([]byte, 64)
	Payload(good, 3, 9)
	f.Add(good, 64)
	f.Add(good[:12], 12)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, v []byte, size int) {
		// Any input, however short or mis-sized, is answered without a
		// panic, and only a value of exactly the expected size is accepted.
		if _, ok := ParsePayload(v, size); ok && (len(v) != size || size < headerBytes) {
			t.Fatalf("accepted %d bytes for size %d", len(v), size)
		}
	})
}

func TestReadProcSelf(t *testing.T) {
	ps, err := readProc(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if ps.PeakRSS <= 0 || ps.CPU < 0 {
		t.Errorf("readProc(self) = %+v", ps)
	}
	if _, err := readProc(1 << 30); err == nil {
		t.Error("readProc of a missing process succeeded")
	}
}

func TestTopicDiskBytes(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"t-0", "t-1", "other-0"} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p, "00000000000000000000.log"), make([]byte, 64<<10), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := topicDiskBytes(dir, "t")
	if err != nil {
		t.Fatal(err)
	}
	if n < 128<<10 || n >= 192<<10 {
		t.Errorf("topicDiskBytes = %d, want the two 64 KiB files of topic t", n)
	}
	if _, err := topicDiskBytes(dir, "missing"); err == nil {
		t.Error("no error for a topic without partition directories")
	}
}

func TestPacerOffersOnSchedule(t *testing.T) {
	p := newPacer(1000) // One send per millisecond.
	due, err := p.offer(context.Background(), 20)
	if err != nil {
		t.Fatal(err)
	}
	if want := p.start.Add(20 * time.Millisecond); !due.Equal(want) {
		t.Errorf("offered at %v, want the scheduled %v", due, want)
	}
	if time.Now().Before(due) {
		t.Error("offer returned before the send was due")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.offer(ctx, 1_000_000); err == nil {
		t.Error("offer ignored a cancelled context")
	}
	var none *pacer
	if _, err := none.offer(ctx, 5); err != nil {
		t.Errorf("unpaced offer: %v", err)
	}
}

// BenchmarkPayload measures the tool's own cost per record, which competes
// with the broker for CPU on a small machine.
func BenchmarkPayload(b *testing.B) {
	v := make([]byte, 1024)
	b.SetBytes(int64(len(v)))
	for i := range b.N {
		Payload(v, 1, uint64(i))
	}
}

func BenchmarkVerify(b *testing.B) {
	v := make([]byte, 1024)
	Payload(v, 1, 0)
	ver := newVerifier(1, len(v))
	b.SetBytes(int64(len(v)))
	for range b.N {
		ver.see(v)
	}
}
