package cascadecontainer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/cascade-kafka/cascade/matrix/cascadecluster"
	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// WithImage names the broker image of RunCluster; the default is
// DefaultImage.
func WithImage(img string) Option {
	return func(s *settings) { s.image = img }
}

// Cluster is a cluster of Cascade containers, each a combined broker and
// controller node (process.roles=broker,controller) with a static voter
// set, on the host's network.
type Cluster struct {
	// Nodes are the containers, ordered by node id from 1.
	Nodes []*Node

	cli   *testcontainers.DockerClient
	conns cluster.Conns // Target's requests, one client per listener
}

// Node is one container of a Cluster.
type Node struct {
	*testcontainers.DockerContainer
	// ID is the node's node.id.
	ID int
	// Addr is the client listener, host:port on loopback.
	Addr string
	// ControllerAddr is the CONTROLLER listener, a voter of the quorum.
	ControllerAddr string

	ready *readyOrExited // counts the starts, for Start's wait
}

// stopTimeout bounds a node's clean shutdown after SIGTERM, after which
// the engine kills it.
const stopTimeout = 30 * time.Second

// RunCluster starts n containers of the broker image (WithImage, or
// DefaultImage) at once, since the metadata quorum forms only when a
// majority runs, and returns when each has printed that it is running.
// Every node is a combined broker and controller on the host's network
// (Linux engines; Docker Desktop with host networking enabled), listening
// on two free loopback ports: its client listener, advertised as
// 127.0.0.1:<port>, and its CONTROLLER listener. The configuration is the
// one of matrix/cascadecluster's nodes (cascadecluster.NodeProperties),
// with the data in the container's /var/lib/cascade, kept across Stop,
// Kill and Start; WithOverride applies to every node afterwards.
//
// On an error after a container was created, the returned Cluster is
// non-nil so that the caller can Terminate it.
func RunCluster(ctx context.Context, n int, opts ...testcontainers.ContainerCustomizer) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("cascadecontainer: RunCluster of %d nodes", n)
	}
	s := settings{image: DefaultImage}
	customizers := s.apply(opts)
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, fmt.Errorf("cascadecontainer: docker client: %w", err)
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("cascadecontainer: choose ports: %w", err)
	}
	c := &Cluster{cli: cli}
	var voters []string
	for i := range n {
		nd := &Node{ID: i + 1, ready: &readyOrExited{want: 1},
			Addr:           net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i])),
			ControllerAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i+1]))}
		c.Nodes = append(c.Nodes, nd)
		voters = append(voters, strconv.Itoa(nd.ID)+"@"+nd.ControllerAddr)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, nd := range c.Nodes {
		wg.Go(func() {
			args := nodeArgs(nd, strings.Join(voters, ","), s.overrides)
			base := []testcontainers.ContainerCustomizer{
				testcontainers.WithHostConfigModifier(func(h *container.HostConfig) { h.NetworkMode = "host" }),
				testcontainers.WithCmd(args...),
				testcontainers.WithWaitStrategyAndDeadline(2*time.Minute, nd.ready),
			}
			ctr, err := testcontainers.Run(ctx, s.image, append(base, customizers...)...)
			nd.DockerContainer = ctr
			if err != nil {
				errs[i] = fmt.Errorf("node %d: %w%s", nd.ID, err, logTail(ctr))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("cascadecontainer: run cluster of %s: %w", s.image, err)
	}
	return c, nil
}

// nodeArgs returns cascade's command line for node nd: the node's
// properties, then the overrides.
func nodeArgs(nd *Node, voters string, overrides []string) []string {
	props := cascadecluster.NodeProperties(&cascadecluster.Node{ID: nd.ID, Addr: nd.Addr, ControllerAddr: nd.ControllerAddr}, voters, strings.Count(voters, ",")+1)
	// The image keeps its data in /var/lib/cascade (its entrypoint's
	// log.dirs).
	delete(props, "log.dirs")
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var args []string
	for _, k := range keys {
		args = append(args, "--override", k+"="+props[k])
	}
	for _, kv := range overrides {
		args = append(args, "--override", kv)
	}
	return args
}

// Brokers returns every node's client address, for a client's bootstrap
// list, as Container.Brokers does for one.
func (c *Cluster) Brokers(context.Context) ([]string, error) {
	as := make([]string, len(c.Nodes))
	for i, nd := range c.Nodes {
		as[i] = nd.Addr
	}
	return as, nil
}

// Node returns node id, or an error naming it.
func (c *Cluster) Node(id int) (*Node, error) {
	if id < 1 || id > len(c.Nodes) || c.Nodes[id-1].DockerContainer == nil {
		return nil, fmt.Errorf("cascadecontainer: no node %d", id)
	}
	return c.Nodes[id-1], nil
}

// Kill sends SIGKILL to node id's broker (docker kill) and waits until its
// container has stopped. Its data stays for Start.
func (c *Cluster) Kill(ctx context.Context, id int) error {
	nd, err := c.Node(id)
	if err != nil {
		return err
	}
	if _, err := c.cli.ContainerKill(ctx, nd.GetContainerID(), client.ContainerKillOptions{Signal: "KILL"}); err != nil {
		return fmt.Errorf("cascadecontainer: kill node %d: %w", id, err)
	}
	for {
		st, err := nd.State(ctx)
		if err != nil {
			return fmt.Errorf("cascadecontainer: node %d state: %w", id, err)
		}
		if !st.Running {
			c.conns.Drop(nd.Addr, nd.ControllerAddr)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cascadecontainer: node %d still runs after SIGKILL: %w", id, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop stops node id cleanly (docker stop: SIGTERM, a controlled shutdown
// that moves its leaderships first), killing it after 30 seconds.
func (c *Cluster) Stop(ctx context.Context, id int) error {
	nd, err := c.Node(id)
	if err != nil {
		return err
	}
	timeout := stopTimeout
	defer c.conns.Drop(nd.Addr, nd.ControllerAddr)
	return nd.DockerContainer.Stop(ctx, &timeout)
}

// Start starts a killed or stopped node again, with its data and
// configuration, and returns when it prints that it is running.
func (c *Cluster) Start(ctx context.Context, id int) error {
	nd, err := c.Node(id)
	if err != nil {
		return err
	}
	nd.ready.want++
	if err := nd.DockerContainer.Start(ctx); err != nil {
		return fmt.Errorf("cascadecontainer: start node %d: %w%s", id, err, logTail(nd.DockerContainer))
	}
	return nil
}

// Pause freezes node id's processes (docker pause, the cgroup freezer):
// its sockets stay open and it says nothing, as a hung host.
func (c *Cluster) Pause(ctx context.Context, id int) error {
	nd, err := c.Node(id)
	if err != nil {
		return err
	}
	if _, err := c.cli.ContainerPause(ctx, nd.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("cascadecontainer: pause node %d: %w", id, err)
	}
	return nil
}

// Resume thaws a paused node (docker unpause).
func (c *Cluster) Resume(ctx context.Context, id int) error {
	nd, err := c.Node(id)
	if err != nil {
		return err
	}
	if _, err := c.cli.ContainerUnpause(ctx, nd.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("cascadecontainer: resume node %d: %w", id, err)
	}
	return nil
}

// Terminate kills and removes every container of the cluster (a paused
// one too) and closes the engine client; it is safe on a cluster that failed to
// start.
func (c *Cluster) Terminate(ctx context.Context) error {
	if c == nil {
		return nil
	}
	var errs []error
	for _, nd := range c.Nodes {
		if nd.DockerContainer == nil {
			continue
		}
		// A paused container is not stopped by the engine; thaw it first
		// (an error only says it was not paused).
		_, _ = c.cli.ContainerUnpause(ctx, nd.GetContainerID(), client.ContainerUnpauseOptions{})
		// Nothing of a test cluster needs a clean stop.
		if err := nd.Terminate(ctx, testcontainers.StopTimeout(0)); err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", nd.ID, err))
		}
	}
	c.conns.Close()
	if err := c.cli.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
