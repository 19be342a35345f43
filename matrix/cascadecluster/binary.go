package cascadecluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

// mainPackage is the command a cluster node runs.
const mainPackage = "github.com/cascade-kafka/cascade/cmd/cascade"

var build struct {
	mu  sync.Mutex // Held for the whole build, so callers wait for one.
	dir string
	bin string
}

// Binary returns the path of cmd/cascade built for this test process,
// building it on first use with the go command (from PATH, else GOROOT).
// A failed build is not remembered: the next call tries again.
func Binary(ctx context.Context) (string, error) {
	build.mu.Lock()
	defer build.mu.Unlock()
	if build.bin != "" {
		return build.bin, nil
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	dir, err := os.MkdirTemp("", "cascade-bin-")
	if err != nil {
		return "", fmt.Errorf("cascadecluster: temp dir: %w", err)
	}
	bin := filepath.Join(dir, "cascade")
	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", bin, mainPackage)
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("cascadecluster: go build %s: %w\n%s", mainPackage, err, out)
	}
	build.dir, build.bin = dir, bin
	return bin, nil
}

// Cleanup removes the binary Binary built, for a TestMain to call after
// the tests; a later Binary builds again.
func Cleanup() error {
	build.mu.Lock()
	defer build.mu.Unlock()
	if build.dir == "" {
		return nil
	}
	err := os.RemoveAll(build.dir)
	build.dir, build.bin = "", ""
	return err
}
