//go:build !race

package record

// raceEnabled reports a -race build, whose sync.Pool drops items at random.
const raceEnabled = false
