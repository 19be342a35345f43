package cascadecontainer

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// DefaultImage is the tag ci/docker-setup.sh gives the broker image built
// from docker/cascade.Dockerfile.
const DefaultImage = "cascade/cascade:dev"

// listenerPort is the port the image's broker listens on inside the
// container (docker/cascade.Dockerfile).
const listenerPort = "9092/tcp"

// readyLine is what cmd/cascade prints once its listener is open.
const readyLine = "Cascade is running."

// Container is a running Cascade broker.
type Container struct {
	*testcontainers.DockerContainer
	bootstrap string
}

// Brokers returns the bootstrap addresses, host:port, that clients on this
// machine use; the broker advertises the same address.
func (c *Container) Brokers(context.Context) ([]string, error) {
	return []string{c.bootstrap}, nil
}

// settings collects the options of Run.
type settings struct {
	hostNetwork bool
	overrides   []string
	image       string // RunCluster's
}

// Option configures the broker; it also satisfies
// testcontainers.ContainerCustomizer, so options and testcontainers'
// own customizers mix in one argument list.
type Option func(*settings)

// apply applies the Options among opts to s and returns the others,
// testcontainers' own customizers.
func (s *settings) apply(opts []testcontainers.ContainerCustomizer) []testcontainers.ContainerCustomizer {
	var others []testcontainers.ContainerCustomizer
	for _, o := range opts {
		if opt, ok := o.(Option); ok {
			opt(s)
			continue
		}
		others = append(others, o)
	}
	return others
}

// Customize does nothing: Run reads Options itself.
func (Option) Customize(*testcontainers.GenericContainerRequest) error { return nil }

// WithHostNetwork runs the broker on the host's network, listening on a
// free loopback port (Linux engines only).
func WithHostNetwork() Option {
	return func(s *settings) { s.hostNetwork = true }
}

// WithOverride sets a broker property by Apache Kafka's name, such as
// "auto.create.topics.enable" or "num.partitions". A key Cascade does not
// honour stops the broker at start, and Run reports its message.
func WithOverride(key, value string) Option {
	return func(s *settings) { s.overrides = append(s.overrides, key+"="+value) }
}

// Run starts Cascade from img and waits until its listener is open. On an
// error after the container was created, the returned Container is
// non-nil so that the caller can terminate it (CleanupContainer does).
func Run(ctx context.Context, img string, opts ...testcontainers.ContainerCustomizer) (*Container, error) {
	var s settings
	customizers := s.apply(opts)
	ports, err := freePorts(1)
	if err != nil {
		return nil, fmt.Errorf("cascadecontainer: choose a port: %w", err)
	}
	port := ports[0]
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := []string{"--override", "advertised.listeners=PLAINTEXT://" + addr}
	var base []testcontainers.ContainerCustomizer
	if s.hostNetwork {
		args = append(args, "--override", "listeners=PLAINTEXT://"+addr)
		base = append(base,
			testcontainers.WithHostConfigModifier(func(h *container.HostConfig) { h.NetworkMode = "host" }),
		)
	} else {
		// The host port is chosen before start because the broker must
		// advertise it; the container listens on 9092 as the image says.
		base = append(base,
			testcontainers.WithExposedPorts(listenerPort),
			testcontainers.WithHostConfigModifier(func(h *container.HostConfig) {
				h.PortBindings = network.PortMap{
					network.MustParsePort(listenerPort): {{HostIP: netip.AddrFrom4([4]byte{127, 0, 0, 1}), HostPort: strconv.Itoa(port)}},
				}
			}),
		)
	}
	base = append(base, testcontainers.WithWaitStrategyAndDeadline(time.Minute, &readyOrExited{want: 1}))
	for _, kv := range s.overrides {
		args = append(args, "--override", kv)
	}
	base = append(base, testcontainers.WithCmd(args...))
	ctr, err := testcontainers.Run(ctx, img, append(base, customizers...)...)
	var c *Container
	if ctr != nil {
		c = &Container{DockerContainer: ctr, bootstrap: addr}
	}
	if err != nil {
		return c, fmt.Errorf("cascadecontainer: run %s: %w%s", img, err, logTail(ctr))
	}
	return c, nil
}

// readyOrExited waits until the broker has printed readyLine (its
// listener is open by then) want times, once per start of the container,
// and fails at once if the broker exits instead, as it does on a refused
// configuration key; testcontainers' log strategy would wait out its
// deadline. A cluster node raises want before each restart, since the log
// keeps the lines of the earlier runs.
type readyOrExited struct{ want int }

func (r *readyOrExited) WaitUntilReady(ctx context.Context, target wait.StrategyTarget) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		rc, err := target.Logs(ctx)
		if err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		log, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		if strings.Count(string(log), readyLine) >= r.want {
			return nil
		}
		st, err := target.State(ctx)
		if err != nil {
			return fmt.Errorf("container state: %w", err)
		}
		if !st.Running && st.Status != "created" {
			return fmt.Errorf("broker exited (status %s, code %d) before it was ready", st.Status, st.ExitCode)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("broker not ready: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// freePorts returns n distinct TCP ports free on loopback at the time of
// the call.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		// Held open until all are chosen, so that they differ.
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// logTail returns the end of the container's log for an error message, so
// that, for example, a refused configuration key is named.
func logTail(ctr *testcontainers.DockerContainer) string {
	if ctr == nil {
		return ""
	}
	// The caller's context may be the one that expired.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := ctr.Logs(ctx)
	if err != nil {
		return fmt.Sprintf("; container log unavailable: %v", err)
	}
	defer rc.Close()
	var t tail
	if _, err := io.Copy(&t, rc); err != nil {
		return fmt.Sprintf("; container log unavailable: %v", err)
	}
	if len(t.b) == 0 {
		return ""
	}
	return "; container log:\n" + string(t.b)
}

// tail keeps the last 4 KiB written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - 4096; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}
