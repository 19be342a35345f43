package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
)

// FreePorts returns n distinct loopback ports that were free a moment ago.
// Another process may take one before the node binds it; RetryPorts
// starts again then.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cluster: find free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// ErrPortInUse reports that a port chosen by FreePorts was taken before the
// node bound it.
var ErrPortInUse = errors.New("port already in use")

// RetryPorts calls start up to three times while it fails with
// ErrPortInUse.
func RetryPorts[T any](ctx context.Context, start func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for attempt := 0; attempt < 3; attempt++ {
		if v, err = start(); err == nil || !errors.Is(err, ErrPortInUse) || ctx.Err() != nil {
			break
		}
	}
	return v, err
}

// WorkDir returns dir, created if missing, or a new temporary directory
// named with prefix when dir is empty; temp reports the latter, which the
// caller removes when it is done.
func WorkDir(dir, prefix string) (_ string, temp bool, err error) {
	if dir == "" {
		if dir, err = os.MkdirTemp("", prefix); err != nil {
			return "", false, fmt.Errorf("cluster: temp dir: %w", err)
		}
		return dir, true, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, fmt.Errorf("cluster: create %s: %w", dir, err)
	}
	return dir, false, nil
}

// FormatProperties renders server.properties entries sorted by key.
func FormatProperties(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, m[k])
	}
	return b.String()
}

// Tail returns the last n bytes of s, marked as cut when it is longer.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// ReadTail returns the last n bytes of the file at path.
func ReadTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	return Tail(string(b), n)
}

// Launch is one node for LaunchAll: its id, the file its output goes to,
// and the call that starts it and waits until it is ready.
type Launch struct {
	ID      int
	LogPath string
	Start   func() error
}

// LaunchAll starts every node at once, since a quorum forms only when a
// majority of voters runs, and waits for all. It returns nil, an error
// wrapping ErrPortInUse when a failed node's log says that a port was
// taken (so RetryPorts starts again), or an error naming every failed node
// followed by logs.
func LaunchAll(nodes []Launch, logs func() string) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.Start()
		}()
	}
	wg.Wait()
	var failed []string
	inUse := false
	for i, e := range errs {
		if e != nil {
			failed = append(failed, fmt.Sprintf("node %d: %v", nodes[i].ID, e))
			// Java says "Address already in use", Go "address already in use".
			inUse = inUse || strings.Contains(strings.ToLower(ReadTail(nodes[i].LogPath, 3000)), "address already in use")
		}
	}
	if len(failed) == 0 {
		return nil
	}
	if inUse {
		return ErrPortInUse
	}
	return fmt.Errorf("cluster did not start: %s\n%s", strings.Join(failed, "; "), logs())
}

// RemoveWorkDir removes a temporary directory WorkDir made, unless the
// environment variable keep is set (to look at the nodes' logs and data
// after a run).
func RemoveWorkDir(dir string, temp bool, keep string) error {
	if !temp || os.Getenv(keep) != "" {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("cluster: remove %s: %w", dir, err)
	}
	return nil
}
