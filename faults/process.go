package faults

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Process is Cascade run as a separate process from a built binary, so it
// can be killed with SIGKILL and restarted on the same data dir and port.
type Process struct {
	Bin     string
	DataDir string
	LogPath string
	// Overrides are passed as --override key=value.
	Overrides map[string]string

	mu   sync.Mutex
	addr string
	cmd  *exec.Cmd
	log  *os.File
	done chan error
}

// BuildCascade builds ./cmd/cascade of the module rooted at moduleDir into
// dir and returns the binary's path.
func BuildCascade(ctx context.Context, moduleDir, dir string) (string, error) {
	bin := filepath.Join(dir, "cascade")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/cascade")
	cmd.Dir = moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building cascade: %w\n%s", err, out)
	}
	return bin, nil
}

// Start starts the broker on a free port (the first time) or on the port it
// had (after a crash), and waits until it accepts connections.
func (p *Process) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.addr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		p.addr = ln.Addr().String()
		ln.Close()
	}
	if p.log == nil {
		f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		p.log = f
	}
	args := []string{
		"--override", "listeners=PLAINTEXT://" + p.addr,
		"--override", "log.dirs=" + p.DataDir,
	}
	for k, v := range p.Overrides {
		args = append(args, "--override", k+"="+v)
	}
	cmd := exec.Command(p.Bin, args...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting cascade: %w", err)
	}
	p.cmd = cmd
	p.done = make(chan error, 1)
	go func() { p.done <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case err := <-p.done:
			return fmt.Errorf("cascade exited at start: %v (log %s)", err, p.LogPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cascade did not listen on %s within 30s (log %s)", p.addr, p.LogPath)
		}
	}
}

// Addr implements Target.
func (p *Process) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addr
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *Process) Kill() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-done
	return nil
}

// Crash implements Target: SIGKILL, then start again on the same data dir.
func (p *Process) Crash(ctx context.Context) error {
	if err := p.Kill(); err != nil {
		return err
	}
	fmt.Fprintf(p.log, "=== kill -9 at %s; restarting\n", time.Now().Format(time.RFC3339Nano))
	return p.Start(ctx)
}

// Stop stops the broker with SIGTERM (a clean shutdown), waiting up to 30
// seconds before SIGKILL.
func (p *Process) Stop() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	var err error
	if cmd != nil {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			err = <-done
		}
	}
	if p.log != nil {
		p.log.Close()
		p.log = nil
	}
	return err
}

// Port returns the broker's port.
func (p *Process) Port() int {
	_, ps, _ := net.SplitHostPort(p.Addr())
	n, _ := strconv.Atoi(ps)
	return n
}
