package main

import (
	"errors"
	"testing"

	"github.com/cascade-kafka/cascade/broker/config"
)

// TestRunRefusesClusterNodes checks that the server.properties of a node of
// a cluster that Cascade does not run yet (replicated internal topics)
// stops cascade at start, saying so, before any port is bound.
func TestRunRefusesClusterNodes(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"kraft-combined.properties", "Invalid value 3 for configuration offsets.topic.replication.factor: Cascade's coordinators answer before their writes replicate, so their internal topics have 1 replica"},
	} {
		err := run([]string{"-config", "../../broker/config/testdata/" + c.file})
		if err == nil || err.Error() != c.want || !errors.Is(err, config.ErrNotRunnable) {
			t.Errorf("%s: got %v, want %s", c.file, err, c.want)
		}
	}
}
