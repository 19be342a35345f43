package bench

import (
	"context"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kfake"
)

// ServeKfake runs a one-broker in-memory kfake cluster on a free loopback
// port until ctx ends, after printing KfakeReadyPrefix and its address to
// out. It is the body of the "kfake-serve" helper process, which keeps
// kfake's CPU and memory in a process of its own, measured like a broker.
func ServeKfake(ctx context.Context, out io.Writer) error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return fmt.Errorf("starting kfake: %w", err)
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	if len(addrs) != 1 {
		return fmt.Errorf("kfake listens on %d addresses, want 1", len(addrs))
	}
	if _, err := fmt.Fprintf(out, "%s%s\n", KfakeReadyPrefix, addrs[0]); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
