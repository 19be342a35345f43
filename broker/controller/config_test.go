package controller

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/metadata"
)

func TestConfigValidate(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	cases := []struct {
		change func(*Config)
		want   string
	}{
		{func(*Config) {}, ""},
		{func(c *Config) { c.NodeID = -1 }, "node.id"},
		{func(c *Config) { c.SessionTimeout = 0 }, "broker.session.timeout.ms"},
		{func(c *Config) { c.HeartbeatInterval = 10 * time.Second }, "broker.heartbeat.interval.ms (10000)"},
		{func(c *Config) { c.DefaultReplicationFactor = 0 }, "default.replication.factor"},
		{func(c *Config) { c.NumPartitions = 0 }, "num.partitions"},
		{func(c *Config) { c.UncleanLeaderElectionInterval = 0 }, "unclean.leader.election.interval.ms"},
		{func(c *Config) { c.LeaderImbalanceCheckInterval = 0 }, "leader.imbalance.check.interval.seconds"},
		{func(c *Config) { c.Rand = nil }, "random source"},
	}
	for _, c := range cases {
		cfg := DefaultConfig(1, r)
		c.change(&cfg)
		_, err := New(cfg)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
	if d := DefaultConfig(1, r); d.SessionTimeout != 9*time.Second || d.HeartbeatInterval != 2*time.Second ||
		d.UncleanLeaderElection || !d.AutoLeaderRebalance || d.LeaderImbalanceCheckInterval != 300*time.Second || d.UncleanLeaderElectionInterval != 300*time.Second {
		t.Fatalf("defaults %+v", d)
	}
}

// TestDeterministic replays one seed twice and expects the same batches,
// byte for byte: the controller depends only on its inputs.
func TestDeterministic(t *testing.T) {
	run := func() []byte {
		h := newHarness(t)
		rr := &randomRun{t: t, h: h, r: rand.New(rand.NewSource(7)), lastEpochs: map[int32]int64{}}
		var all []byte
		for range 300 {
			_, recs, _ := rr.step()
			next, err := metadata.Apply(h.img, recs)
			if err != nil {
				t.Fatal(err)
			}
			h.img = next
			all = append(all, metadata.EncodeBatch(recs)...)
		}
		return all
	}
	a, b := run(), run()
	if len(a) < 1000 || !bytes.Equal(a, b) {
		t.Fatalf("runs differ (%d and %d bytes)", len(a), len(b))
	}
}
