package linearizability

import (
	"testing"
	"time"
)

// A broker that is down for a while leaves most produces of its clients
// unknown and unread; the check still decides, since only a produce
// somebody read has to be placed by the search.
func TestManyUnknownProducesDecide(t *testing.T) {
	h := generate(genConfig{seed: 11, ops: 4000, partitions: 1, clients: 24, unknownRate: 0.7})
	rep, err := Check(h, Options{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Valid() {
		t.Fatalf("valid history with many unknown produces:\n%s", rep.Summary())
	}
}
