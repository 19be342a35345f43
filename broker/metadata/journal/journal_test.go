package journal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func replayAll(t testing.TB, j *File) [][]byte {
	t.Helper()
	var out [][]byte
	if err := j.Replay(func(b []byte) error { out = append(out, append([]byte(nil), b...)); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAppendReplay(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append([]byte("x")); err != ErrNotReplayed {
		t.Fatalf("append before replay: %v", err)
	}
	if got := replayAll(t, j); len(got) != 0 {
		t.Fatal(got)
	}
	var want [][]byte
	for i := 0; i < 5; i++ {
		b := []byte(fmt.Sprintf("batch-%d", i))
		want = append(want, b)
		if err := j.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	if err := j.Append([]byte("late")); err != ErrClosed {
		t.Fatalf("append after close: %v", err)
	}
	j, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	got := replayAll(t, j)
	if len(got) != 5 || !bytes.Equal(got[4], want[4]) || j.Truncated != 0 {
		t.Fatalf("%q truncated %d", got, j.Truncated)
	}
	// Rewrite keeps only what it is given, and appends continue after it.
	if err := j.Rewrite([][]byte{[]byte("snap")}); err != nil {
		t.Fatal(err)
	}
	if err := j.Append([]byte("after")); err != nil {
		t.Fatal(err)
	}
	j.Close()
	j, _ = Open(dir)
	defer j.Close()
	if got := replayAll(t, j); len(got) != 2 || string(got[0]) != "snap" || string(got[1]) != "after" {
		t.Fatalf("%q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName+".tmp")); !os.IsNotExist(err) {
		t.Fatal("temporary file left behind")
	}
}

func TestNotAJournal(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("something else entirely"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil {
		t.Fatal("opened a foreign file")
	}
}

// FuzzReplay feeds arbitrary bytes after the header: Replay must not panic
// or allocate beyond MaxFrame, and afterwards the file must hold exactly the
// frames it returned.
func FuzzReplay(f *testing.F) {
	valid := func(frames ...string) []byte {
		dir := f.TempDir()
		j, _ := Open(dir)
		replayAll(f, j)
		for _, fr := range frames {
			j.Append([]byte(fr))
		}
		j.Close()
		b, _ := os.ReadFile(filepath.Join(dir, FileName))
		return b[len(header):]
	}
	f.Add(valid("a", "bb", "ccc"))
	f.Add(valid("a")[:5])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, tail []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), append([]byte(header), tail...), 0o644); err != nil {
			t.Fatal(err)
		}
		j, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		first := replayAll(t, j)
		if err := j.Append([]byte("next")); err != nil {
			t.Fatal(err)
		}
		j.Close()
		j, err = Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		second := replayAll(t, j)
		if len(second) != len(first)+1 || string(second[len(first)]) != "next" || j.Truncated != 0 {
			t.Fatalf("first %d frames, then %d (truncated %d)", len(first), len(second), j.Truncated)
		}
	})
}

func TestDirLock(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "failed to acquire lock") {
		t.Fatalf("second open: %v", err)
	}
	j.Close()
	j2, err := Open(dir)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	j2.Close()
}
