package cluster

import (
	"slices"
	"testing"
	"time"
)

func TestSpreadOf(t *testing.T) {
	if _, ok := SpreadOf(nil); ok {
		t.Fatal("a spread of nothing")
	}
	s, ok := SpreadOf([]time.Duration{3 * time.Second, 1200 * time.Millisecond, 9050 * time.Millisecond})
	if !ok || s.Min != "1.2" || s.Median != "3.0" || s.Max != "9.1" || !slices.Equal(s.Runs, []string{"3.0", "1.2", "9.1"}) {
		t.Fatalf("SpreadOf = %+v, %v", s, ok)
	}
}
