// Package scriptargs parses the key=value arguments of the data-driven
// scripts that test Cascade's state machines (controller, replica,
// transaction coordinator), so that every script reads its numbers and
// lists the same way and a malformed argument fails the test with its
// name. Each test keeps its arguments as a map of key to value (a list's
// values joined by commas) and calls these.
package scriptargs

import (
	"strconv"
	"strings"
	"testing"
)

// Str returns the value of k, failing the test when it is missing.
func Str(t testing.TB, a map[string]string, k string) string {
	t.Helper()
	v, ok := a[k]
	if !ok {
		t.Fatalf("missing %s=", k)
	}
	return v
}

// Int returns the integer value of k, or def when k is missing.
func Int(t testing.TB, a map[string]string, k string, def int64) int64 {
	t.Helper()
	v, ok := a[k]
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", k, v, err)
	}
	return n
}

// Ints returns the comma-separated int32 list of k: nil when k is
// missing, empty (not nil) when it is given with no value.
func Ints(t testing.TB, a map[string]string, k string) []int32 {
	t.Helper()
	v, ok := a[k]
	if !ok {
		return nil
	}
	out := []int32{}
	for _, f := range strings.Split(v, ",") {
		if f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			t.Fatalf("%s=%q: %v", k, v, err)
		}
		out = append(out, int32(n))
	}
	return out
}
