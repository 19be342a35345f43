package python

import (
	"context"
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/cascade-kafka/cascade/matrix/clients/provision"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// Client ids this package registers.
const (
	ConfluentClient   = "python-confluent-kafka"
	KafkaPythonClient = "python-kafka-python"
)

//go:embed driver.py driver_common.py driver_txn.py requirements.txt
var sources embed.FS

// modules are the driver program's files: driver.py imports the others.
var modules = []string{"driver.py", "driver_common.py", "driver_txn.py"}

func init() {
	for _, c := range []string{ConfluentClient, KafkaPythonClient} {
		driver.Register(c, Opener(c))
	}
}

// Opener returns the Opener of one Python client: it provisions the
// virtualenv (first use only) and starts driver.py for client.
func Opener(client string) driver.Opener {
	return func(ctx context.Context, bootstrap string) (driver.Driver, error) {
		env, err := Ensure(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", client, err)
		}
		return driver.StartProcess(ctx, env.Spec(client), bootstrap)
	}
}

// Env is a provisioned virtualenv with the driver program.
type Env struct {
	// Dir is the virtualenv.
	Dir string
	// Python is the virtualenv's interpreter.
	Python string
	// Script is driver.py, written with the modules it imports into a
	// directory of the cache keyed by their contents.
	Script string
}

// Spec returns the process spec that runs the driver for client.
func (e *Env) Spec(client string) driver.ProcessSpec {
	return driver.ProcessSpec{
		Client: client,
		Argv:   []string{e.Python, e.Script, client},
		// Unbuffered stderr, so the orchestrator's tail holds the last lines
		// even when the driver is killed.
		Env: []string{"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"},
	}
}

// minPython is the oldest interpreter the pinned libraries support.
var minPython = [2]int{3, 9}

// Ensure returns the virtualenv of the pinned requirements, creating it on
// first use: `python3 -m venv`, then `pip install -r requirements.txt`
// from PyPI, under a file lock. The virtualenv is keyed by a hash of
// requirements.txt and the interpreter, so a changed pin or a new Python
// builds a new one. CASCADE_PYTHON names the interpreter (default python3).
func Ensure(ctx context.Context) (*Env, error) {
	py, version, err := findPython(ctx)
	if err != nil {
		return nil, err
	}
	cache, err := provision.CacheDir()
	if err != nil {
		return nil, err
	}
	reqs, err := sources.ReadFile("requirements.txt")
	if err != nil {
		return nil, err
	}
	key := provision.Key(string(reqs), "python "+version, py, runtime.GOOS+"/"+runtime.GOARCH)
	root := filepath.Join(cache, "python")
	env := &Env{Dir: filepath.Join(root, "venv-"+key[:16])}
	env.Python = filepath.Join(env.Dir, "bin", "python")
	err = provision.Timed("python virtualenv "+env.Dir, func() (bool, error) {
		return provision.Once(ctx, env.Dir, key, func(dir string) error { return build(ctx, py, dir, reqs) })
	})
	if err != nil {
		return nil, err
	}
	files := make([][]byte, len(modules))
	parts := make([]string, len(modules))
	for i, m := range modules {
		if files[i], err = sources.ReadFile(m); err != nil {
			return nil, err
		}
		parts[i] = m + "\x00" + string(files[i])
	}
	dir := filepath.Join(root, "driver-"+provision.Key(parts...)[:16])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("python: %w", err)
	}
	for i, m := range modules {
		path := filepath.Join(dir, m)
		if _, err := os.Stat(path); err != nil {
			if err := provision.WriteFileAtomic(path, files[i]); err != nil {
				return nil, err
			}
		}
	}
	env.Script = filepath.Join(dir, "driver.py")
	return env, nil
}

// build creates the virtualenv in dir and installs the requirements.
func build(ctx context.Context, py, dir string, reqs []byte) error {
	fmt.Fprintf(provision.Progress, "provision: creating the Python client virtualenv in %s (pip install from PyPI, first run only)\n", dir)
	if _, err := provision.Run(ctx, "", py, "-m", "venv", dir); err != nil {
		return fmt.Errorf("python: create virtualenv: %w", err)
	}
	reqPath := filepath.Join(dir, "requirements.txt")
	if err := os.WriteFile(reqPath, reqs, 0o644); err != nil {
		return fmt.Errorf("python: %w", err)
	}
	vpy := filepath.Join(dir, "bin", "python")
	if _, err := provision.Run(ctx, dir, vpy, "-m", "pip", "install", "--disable-pip-version-check",
		"--no-input", "--quiet", "--only-binary=confluent-kafka", "-r", reqPath); err != nil {
		return fmt.Errorf("python: pip install the pinned client libraries (needs PyPI): %w", err)
	}
	// Every module driver.py and kafka-python's codecs import.
	if _, err := provision.Run(ctx, dir, vpy, "-c",
		"import confluent_kafka, kafka, lz4.frame, snappy, cramjam, zstandard"); err != nil {
		return fmt.Errorf("python: the installed libraries do not import: %w", err)
	}
	return nil
}

// findPython locates the interpreter and checks that it is new enough and
// has the venv module (Debian ships it separately, as python3-venv).
func findPython(ctx context.Context) (path, version string, err error) {
	name := os.Getenv("CASCADE_PYTHON")
	if name == "" {
		name = "python3"
	}
	path, err = exec.LookPath(name)
	if err != nil {
		return "", "", provision.Missing("%s not found in PATH; install Python %d.%d+ with venv (Debian: apt-get install python3 python3-venv) for the Python matrix clients, or deselect them with MATRIX_CLIENTS",
			name, minPython[0], minPython[1])
	}
	out, err := exec.CommandContext(ctx, path, "-c",
		"import sys; print('%d.%d.%d' % sys.version_info[:3])").CombinedOutput()
	lines := strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)
	if len(lines) == 0 || lines[0] == "" {
		return "", "", fmt.Errorf("python: %s does not run: %v: %s", path, err, provision.Tail(string(out), 500))
	}
	version = strings.TrimSpace(lines[0])
	var v [2]int
	for i, s := range strings.SplitN(version, ".", 3)[:2] {
		if v[i], err = strconv.Atoi(s); err != nil {
			return "", "", fmt.Errorf("python: cannot read the version of %s from %q", path, version)
		}
	}
	if v[0] < minPython[0] || (v[0] == minPython[0] && v[1] < minPython[1]) {
		return "", "", provision.Missing("%s is Python %s; the Python matrix clients need %d.%d+ (Debian: apt-get install python3 python3-venv)",
			path, version, minPython[0], minPython[1])
	}
	if cerr := exec.CommandContext(ctx, path, "-c", "import venv, ensurepip").Run(); cerr != nil {
		return "", "", provision.Missing("%s (Python %s) lacks the venv/ensurepip modules; install them (Debian: apt-get install python3-venv)", path, version)
	}
	return path, version, nil
}
