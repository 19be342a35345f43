package cluster

import (
	"slices"
	"strconv"
	"time"
)

// Spread summarises measured durations in seconds with one decimal: the
// least, the median, the most, and every run in the order measured.
type Spread struct {
	Min, Median, Max string
	Runs             []string
}

// SpreadOf summarises ds; false when there is none.
func SpreadOf(ds []time.Duration) (Spread, bool) {
	if len(ds) == 0 {
		return Spread{}, false
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	sec := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) }
	s := Spread{Min: sec(sorted[0]), Median: sec(sorted[len(sorted)/2]), Max: sec(sorted[len(sorted)-1])}
	for _, d := range ds {
		s.Runs = append(s.Runs, sec(d))
	}
	return s, true
}
