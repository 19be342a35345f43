package main

import (
	"errors"
	"testing"

	"github.com/cascade-kafka/cascade/broker/config"
)

// TestRunRefusesClusterNodes checks that the server.properties of nodes of
// a cluster that Cascade does not run yet (replicated topics) stop cascade
// at start, saying so, before any port is bound.
func TestRunRefusesClusterNodes(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"kraft-combined.properties", "Invalid value 3 for configuration default.replication.factor: Cascade's cluster does not replicate partitions yet, so every partition has 1 replica"},
		{"kraft-broker.properties", "Invalid value 3 for configuration default.replication.factor: Cascade's cluster does not replicate partitions yet, so every partition has 1 replica"},
	} {
		err := run([]string{"-config", "../../broker/config/testdata/" + c.file})
		if err == nil || err.Error() != c.want || !errors.Is(err, config.ErrNotRunnable) {
			t.Errorf("%s: got %v, want %s", c.file, err, c.want)
		}
	}
}
