package faults

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteListing(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "t-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "t-0", "00000000000000000000.log"), make([]byte, 123), 0o644); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteListing(&b, dir); err != nil {
		t.Fatal(err)
	}
	want := "              ./\n              t-0/\n         123  t-0/00000000000000000000.log\n"
	if b.String() != want {
		t.Errorf("listing:\n%q\nwant\n%q", b.String(), want)
	}
	if err := WriteListing(&b, filepath.Join(dir, "missing")); err == nil {
		t.Error("listing a missing dir succeeded")
	}
}
