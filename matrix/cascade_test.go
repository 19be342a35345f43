//go:build !nocascade

package matrix_test

import (
	"context"
	"testing"

	"github.com/cascade-kafka/cascade/broker/brokertest"
	"github.com/cascade-kafka/cascade/matrix"
)

// The cascade target is an embedded broker from broker/brokertest. It is
// wired here, in a test file, so that the matrix package itself never
// imports the broker: the harness treats every target as a black box.
func init() {
	matrix.CascadeStarter = func(ctx context.Context, t testing.TB, overrides map[string]string) (matrix.Instance, error) {
		b := brokertest.Start(t, overrides)
		return cascadeInstance{b}, nil
	}
}

type cascadeInstance struct{ b *brokertest.Broker }

func (c cascadeInstance) Bootstrap() string { return c.b.Addr() }
func (c cascadeInstance) Version() string   { return "Cascade (embedded, broker/brokertest)" }

// Stop leaves the shutdown to brokertest's cleanup, which closes the broker
// when the test ends.
func (c cascadeInstance) Stop() error { return nil }
