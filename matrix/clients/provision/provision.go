package provision

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// ErrToolMissing reports that a toolchain a client driver needs (python3
// with venv, java, mvn) is not installed. Its message names what to
// install.
var ErrToolMissing = errors.New("required tool missing")

// Missing returns an error wrapping ErrToolMissing with advice.
func Missing(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrToolMissing, fmt.Sprintf(format, args...))
}

// CacheDir returns $CASCADE_CACHE_DIR, or os.UserCacheDir()/cascade: the
// same cache matrix/apachekafka keeps Apache Kafka's jars in.
func CacheDir() (string, error) {
	if d := os.Getenv("CASCADE_CACHE_DIR"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("provision: no cache dir (set CASCADE_CACHE_DIR): %w", err)
	}
	return filepath.Join(base, "cascade"), nil
}

// Hash returns the hex SHA-256 of every regular file in fsys (paths and
// contents, in lexical order) followed by extra strings. It keys a cache
// entry by exactly what went into it.
func Hash(fsys fs.FS, extra ...string) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "file %q %d\n", p, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("provision: hash sources: %w", err)
	}
	for _, s := range extra {
		fmt.Fprintf(h, "extra %q\n", s)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Key returns the hex SHA-256 of parts, each length-prefixed so that
// different splits of the same bytes differ.
func Key(parts ...string) string {
	h := sha256.New()
	for _, s := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// CopyFS writes every regular file of fsys under dir, creating
// directories as needed.
func CopyFS(fsys fs.FS, dir string) error {
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
}

// WriteFileAtomic writes b to p through a temporary file and a rename, so
// a concurrent reader sees the whole file or none.
func WriteFileAtomic(p string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), path.Base(p)+".tmp*")
	if err != nil {
		return fmt.Errorf("provision: write %s: %w", p, err)
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), p)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("provision: write %s: %w", p, werr)
	}
	return nil
}

// completeFile marks a finished cache entry; it holds the entry's stamp.
const completeFile = ".complete"

// Complete reports whether dir holds a finished build stamped stamp.
func Complete(dir, stamp string) bool {
	b, err := os.ReadFile(filepath.Join(dir, completeFile))
	return err == nil && strings.TrimSpace(string(b)) == stamp
}

// Once makes sure dir holds a finished build stamped stamp. When it does
// not, Once takes an exclusive file lock on dir+".lock" (so parallel test
// binaries build once and the others wait), clears dir, runs build(dir)
// and marks dir complete. A failed build leaves dir unmarked, so the next
// call builds again. built reports whether this call ran build.
func Once(ctx context.Context, dir, stamp string, build func(dir string) error) (built bool, err error) {
	if Complete(dir, stamp) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return false, fmt.Errorf("provision: create cache: %w", err)
	}
	unlock, err := LockFile(ctx, dir+".lock")
	if err != nil {
		return false, err
	}
	defer unlock()
	if Complete(dir, stamp) { // Another process finished while we waited.
		return false, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("provision: clear stale %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, fmt.Errorf("provision: create %s: %w", dir, err)
	}
	if err := build(dir); err != nil {
		return true, err
	}
	if err := WriteFileAtomic(filepath.Join(dir, completeFile), []byte(stamp+"\n")); err != nil {
		return true, err
	}
	return true, nil
}

// Run runs a provisioning command and returns its combined output; a
// failure carries the command and the tail of its output.
func Run(ctx context.Context, dir string, argv ...string) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, Tail(out.String(), 4000))
	}
	return out.String(), nil
}

// Tail returns the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// Progress is where provisioning reports what it does; it is the test
// binary's stderr, which `go test -v` streams, so a first run that spends
// a minute in pip or Maven says so.
var Progress io.Writer = os.Stderr

// Timed runs f, reporting its start and, when it did work, its duration
// on Progress. what names the step ("python virtualenv").
func Timed(what string, f func() (built bool, err error)) error {
	start := time.Now()
	built, err := f()
	if err != nil {
		return err
	}
	if built {
		fmt.Fprintf(Progress, "provision: %s built in %v\n", what, time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}
