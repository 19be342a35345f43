package main

import (
	"errors"
	"testing"

	"github.com/cascade-kafka/cascade/broker/config"
)

// TestRunRefusesClusterNodes checks that the server.properties of a node of
// a cluster that Cascade does not run yet (a share coordinator's topic)
// stops cascade at start, saying so, before any port is bound.
func TestRunRefusesClusterNodes(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"kraft-combined.properties", "Invalid value 3 for configuration share.coordinator.state.topic.replication.factor: Cascade has no share groups, so it never creates __share_group_state"},
	} {
		err := run([]string{"-config", "../../broker/config/testdata/" + c.file})
		if err == nil || err.Error() != c.want || !errors.Is(err, config.ErrNotRunnable) {
			t.Errorf("%s: got %v, want %s", c.file, err, c.want)
		}
	}
}
