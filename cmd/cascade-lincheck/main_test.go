package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const valid = `{"client":"a","op":"produce","topic":"t","partition":0,"value":"x","call_ns":0,"return_ns":10,"outcome":"ok","offset":0}
{"client":"b","op":"fetch","topic":"t","partition":0,"from":0,"isolation":"read_uncommitted","records":[{"offset":0,"value":"x"}],"high_watermark":1,"call_ns":20,"return_ns":30,"outcome":"ok"}
`

// Produces acknowledged in one order at offsets of the other.
const reordered = `{"client":"a","op":"produce","topic":"t","partition":0,"value":"x","call_ns":0,"return_ns":10,"outcome":"ok","offset":1}
{"client":"b","op":"produce","topic":"t","partition":0,"value":"y","call_ns":20,"return_ns":30,"outcome":"ok","offset":0}
`

func write(t *testing.T, s string) string {
	p := filepath.Join(t.TempDir(), "h.jsonl")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExitCodes(t *testing.T) {
	var out, errb bytes.Buffer
	if c := run([]string{write(t, valid)}, &out, &errb); c != 0 {
		t.Fatalf("valid: exit %d: %s %s", c, out.String(), errb.String())
	}
	html := filepath.Join(t.TempDir(), "v.html")
	out.Reset()
	if c := run([]string{"-html", html, write(t, reordered)}, &out, &errb); c != 1 {
		t.Fatalf("invalid: exit %d: %s", c, out.String())
	}
	if !strings.Contains(out.String(), "not_linearizable t-0") {
		t.Fatalf("anomaly not listed: %s", out.String())
	}
	if b, err := os.ReadFile(html); err != nil || !bytes.Contains(b, []byte("<html")) {
		t.Fatalf("no visualization written: %v", err)
	}
	if c := run([]string{write(t, "{not json\n")}, &out, &errb); c != 2 {
		t.Fatalf("garbage: exit %d", c)
	}
	if c := run([]string{filepath.Join(t.TempDir(), "missing")}, &out, &errb); c != 2 {
		t.Fatalf("missing file: exit %d", c)
	}
}

// Two members given partition 1 in generation 5.
const doubleOwner = `{"client":"m1","op":"assignment","group":"g","member":"m-1","generation":5,"topic":"t","partitions":[0,1],"call_ns":0,"return_ns":10,"outcome":"ok"}
{"client":"m2","op":"assignment","group":"g","member":"m-2","generation":5,"topic":"t","partitions":[1],"call_ns":2,"return_ns":10,"outcome":"ok"}
`

func TestDoubleOwnerExit(t *testing.T) {
	var out, errb bytes.Buffer
	if c := run([]string{write(t, doubleOwner)}, &out, &errb); c != 1 {
		t.Fatalf("double owner: exit %d: %s %s", c, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "double_owner g/t-1: generation 5") {
		t.Fatalf("anomaly not listed: %s", out.String())
	}
}
