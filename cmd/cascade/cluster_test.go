package main

import (
	"errors"
	"testing"

	"github.com/cascade-kafka/cascade/broker/config"
)

// TestRunRefusesClusterNodes checks that the server.properties of nodes of
// a three-node cluster that Cascade does not run yet (replicated internal
// topics, split roles) stop cascade at start, saying so, before any port is bound.
func TestRunRefusesClusterNodes(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"kraft-combined.properties", "Invalid value 3 for configuration offsets.topic.replication.factor: Cascade's cluster keeps the coordinators' internal topics on one node, so they have 1 replica"},
		{"kraft-broker.properties", "process.roles=broker: Cascade runs only combined broker,controller nodes; it does not run broker-only or controller-only nodes yet"},
		{"kraft-controller.properties", "process.roles=controller: Cascade runs only combined broker,controller nodes; it does not run broker-only or controller-only nodes yet"},
	} {
		err := run([]string{"-config", "../../broker/config/testdata/" + c.file})
		if err == nil || err.Error() != c.want || !errors.Is(err, config.ErrNotRunnable) {
			t.Errorf("%s: got %v, want %s", c.file, err, c.want)
		}
	}
}
