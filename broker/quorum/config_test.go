package quorum

import (
	"testing"
	"time"
)

func TestTimingFromKafka(t *testing.T) {
	for _, tc := range []struct {
		election, fetch int
		tick            time.Duration
		want            Timing
		err             bool
	}{
		{1000, 2000, 100 * time.Millisecond, Timing{100 * time.Millisecond, 10, 1}, false},
		{1000, 4000, 100 * time.Millisecond, Timing{100 * time.Millisecond, 20, 2}, false},
		{500, 1000, 50 * time.Millisecond, Timing{50 * time.Millisecond, 10, 1}, false},
		{2000, 2000, 100 * time.Millisecond, Timing{}, true}, // election above fetch/2
		{100, 200, 100 * time.Millisecond, Timing{}, true},   // one tick
		{0, 2000, 100 * time.Millisecond, Timing{}, true},
		{1000, 2000, 0, Timing{}, true},
	} {
		got, err := TimingFromKafka(tc.election, tc.fetch, tc.tick)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("TimingFromKafka(%d, %d, %v) = %+v, %v; want %+v, error %v", tc.election, tc.fetch, tc.tick, got, err, tc.want, tc.err)
		}
	}
}

func TestConfigRefusesWhatItCannotRun(t *testing.T) {
	base := Config{NodeID: 1, Voters: map[uint64]string{1: "a", 2: "b", 3: "c"}, Dir: t.TempDir(), ClusterID: "c"}
	if _, err := base.withDefaults(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"node not a voter": func(c *Config) { c.NodeID = 4 },
		"node id 0":        func(c *Config) { c.NodeID = 0 },
		"no dir":           func(c *Config) { c.Dir = "" },
		"no cluster id":    func(c *Config) { c.ClusterID = "" },
		"heartbeat >= election": func(c *Config) {
			c.Timing = Timing{TickInterval: time.Millisecond, ElectionTick: 2, HeartbeatTick: 2}
		},
	} {
		c := base
		c.Voters = map[uint64]string{1: "a", 2: "b", 3: "c"}
		mutate(&c)
		if _, err := c.withDefaults(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
