package main

import (
	"os"
	"strings"
	"testing"
)

func TestRunRefusesUnknownKey(t *testing.T) {
	err := run([]string{"--override", "no.such.key=1"})
	if err == nil || !strings.Contains(err.Error(), "no.such.key") {
		t.Fatalf("unknown key: %v", err)
	}
	err = run([]string{"--override", "num.partitions=zero"})
	if err == nil || !strings.Contains(err.Error(), "num.partitions") {
		t.Fatalf("malformed value: %v", err)
	}
	if err := run([]string{"-config", "/nonexistent/server.properties"}); err == nil {
		t.Fatal("missing config file accepted")
	}
}

func TestAPITable(t *testing.T) {
	tab := apiTable()
	for _, want := range []string{"| 0 | Produce | 0-13 |", "| 1 | Fetch | 4-18 |", "| 18 | ApiVersions | 0-4 |"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
}

// TestREADMEAPITable holds the README's table of supported APIs equal to
// what the registry advertises; regenerate it with `cascade -print-apis`.
func TestREADMEAPITable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), apiTable()) {
		t.Errorf("README.md's API table is out of date; replace it with the output of go run ./cmd/cascade -print-apis:\n%s", apiTable())
	}
}
