package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	mcontainer "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// Name is the runtime's name, the value of MATRIX_RUNTIME that selects it.
const Name = "container"

// Spec is a client whose driver runs in a container.
type Spec struct {
	// Client is the client id, as in the driver registry.
	Client string
	// Image is the image the driver runs in.
	Image *Image
	// Args are the container's arguments (after the image's entrypoint).
	Args []string
}

// Specs are the clients this runtime runs in containers, by client id:
// the out-of-process drivers of matrix/clients. Every other client (the Go
// drivers) stays in process.
var Specs = map[string]Spec{
	"python-confluent-kafka": {Client: "python-confluent-kafka", Image: Python, Args: []string{"python-confluent-kafka"}},
	"python-kafka-python":    {Client: "python-kafka-python", Image: Python, Args: []string{"python-kafka-python"}},
	"java":                   {Client: "java", Image: Java},
}

// Progress receives one line per image build; os.Stderr by default, as the
// matrix's own progress lines.
var Progress io.Writer = os.Stderr

// Labels on every driver container: the client id, and a per-process
// session id so that a run (or a test) can tell its own containers apart.
const (
	LabelClient  = "org.cascade.matrix.client"
	LabelSession = "org.cascade.matrix.session"
)

// session identifies this process's containers.
var session = func() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms.
	return hex.EncodeToString(b[:])
}()

// ErrNoEngine reports that no Docker engine answered.
var ErrNoEngine = errors.New("container: no Docker engine")

func init() {
	driver.RegisterRuntime(Name, func(client string) (driver.Opener, bool) {
		spec, ok := Specs[client]
		if !ok {
			return nil, false
		}
		return Opener(spec), true
	})
}

// Opener returns an Opener that starts spec's driver in a new container
// per Open; the container lives until the driver's Close.
func Opener(spec Spec) driver.Opener {
	return func(ctx context.Context, bootstrap string) (driver.Driver, error) {
		return Start(ctx, spec, bootstrap)
	}
}

var (
	engineOnce sync.Once
	engineCli  *testcontainers.DockerClient
	engineErr  error
)

// Engine returns a client of the Docker engine testcontainers-go finds
// (DOCKER_HOST, ~/.testcontainers.properties, the default socket), or an
// error wrapping ErrNoEngine that says what to run. The answer is kept for
// the life of the process, so a missing engine costs one probe.
func Engine(ctx context.Context) (*testcontainers.DockerClient, error) {
	engineOnce.Do(func() {
		// Containers here remove themselves (AutoRemove, stdin closed at
		// exit), so the reaper is not needed; its image is often not
		// pullable (no registry), which would fail every start.
		if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
			if err := os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true"); err != nil {
				engineErr = fmt.Errorf("container: disable the reaper: %w", err)
				return
			}
		}
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		cli, err := testcontainers.NewDockerClientWithOpts(pctx)
		if err == nil {
			_, err = cli.Ping(pctx, client.PingOptions{})
		}
		if err != nil {
			engineErr = noEngine(err)
			return
		}
		engineCli = cli
	})
	return engineCli, engineErr
}

// noEngine explains a failed engine probe: what needs the engine and what
// to run.
func noEngine(err error) error {
	return fmt.Errorf("%w: run ci/docker-setup.sh (installs and starts dockerd, builds the images) or start Docker; %s=%s runs the Python and Java drivers in containers (unset it to run them as local processes); the engine said: %v",
		ErrNoEngine, driver.RuntimeEnv, Name, err)
}

// Start runs spec's driver in a container on the host network and sends
// hello with bootstrap. The container is removed when the driver is closed,
// and by Docker itself whenever the driver exits.
func Start(ctx context.Context, spec Spec, bootstrap string) (driver.Driver, error) {
	cli, err := Engine(ctx)
	if err != nil {
		return nil, err
	}
	image, err := spec.Image.Ensure(ctx, cli, Progress)
	if err != nil {
		return nil, err
	}
	ctr, err := testcontainers.Run(ctx, image,
		testcontainers.WithCmd(spec.Args...),
		testcontainers.WithNoStart(),
		testcontainers.WithLogger(quietLogger{}),
		testcontainers.WithLabels(map[string]string{LabelClient: spec.Client, LabelSession: session}),
		testcontainers.WithConfigModifier(func(c *mcontainer.Config) {
			// Stdin stays open while one attach holds it, and closes
			// when that attach ends: the driver's end of input.
			c.OpenStdin, c.StdinOnce = true, true
			c.AttachStdin, c.AttachStdout, c.AttachStderr = true, true, true
		}),
		testcontainers.WithHostConfigModifier(func(h *mcontainer.HostConfig) {
			h.NetworkMode = "host"
			h.AutoRemove = true
		}),
	)
	if err != nil {
		if ctr != nil {
			err = errors.Join(err, forceRemove(cli, ctr.GetContainerID()))
		}
		return nil, fmt.Errorf("container %s: create from %s: %w", spec.Client, image, err)
	}
	id := ctr.GetContainerID()
	// Attach before start, so not a byte of the driver's output is missed.
	att, err := cli.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("container %s: attach: %w", spec.Client, err), forceRemove(cli, id))
	}
	if err := ctr.Start(ctx); err != nil {
		att.Close()
		return nil, errors.Join(fmt.Errorf("container %s: start %s: %w", spec.Client, image, err), forceRemove(cli, id))
	}

	// The attach stream multiplexes stdout and stderr; split them.
	stdout, stdoutW := io.Pipe()
	log := &tail{max: 16 << 10}
	exited := make(chan struct{})
	go func() {
		_, err := stdcopy.StdCopy(stdoutW, log, att.Reader)
		stdoutW.CloseWithError(err) // nil: io.EOF for the reader, as a process's stdout at exit.
		att.Close()
		close(exited)
	}()
	return driver.StartStream(ctx, driver.Stream{
		Client: spec.Client,
		Stdin:  closeWriter{att},
		Stdout: stdout,
		Log:    log,
		Exited: exited,
		Kill: func() error {
			kctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := cli.ContainerKill(kctx, id, client.ContainerKillOptions{})
			if err != nil && !isNotFound(err) && !errdefs.IsConflict(err) {
				// The container could not be killed; end the attach so
				// that the reader and Exited still finish.
				att.Close()
				return fmt.Errorf("container %s: kill: %w", spec.Client, err)
			}
			return nil
		},
		Release: func() error { return remove(cli, id) },
	}, bootstrap)
}

// remove waits up to 10 seconds for Docker to remove the container (it is
// created with AutoRemove) and force-removes it if it is still there.
func remove(cli client.APIClient, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w := cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: mcontainer.WaitConditionRemoved})
	select {
	case <-w.Result:
		return nil
	case err := <-w.Error:
		if isNotFound(err) {
			return nil
		}
	}
	return forceRemove(cli, id)
}

// forceRemove removes the container now, running or not; one that never
// started is not removed by AutoRemove.
func forceRemove(cli client.APIClient, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	// Conflict: Docker is already removing it (AutoRemove).
	if err != nil && !isNotFound(err) && !errdefs.IsConflict(err) {
		return fmt.Errorf("container: remove %s: %w", shortID(id), err)
	}
	return nil
}

// isNotFound reports an engine answer that the object does not exist:
// for a container created with AutoRemove that only means it is gone.
func isNotFound(err error) bool { return errdefs.IsNotFound(err) }

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// closeWriter makes the attach connection's write half the driver's stdin:
// Close ends the input without closing the output still to be read.
type closeWriter struct{ att client.ContainerAttachResult }

func (c closeWriter) Write(b []byte) (int, error) { return c.att.Conn.Write(b) }
func (c closeWriter) Close() error                { return c.att.CloseWrite() }

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// quietLogger drops testcontainers-go's per-container progress lines; the
// matrix prints its own, and errors come back as values.
type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}
