package driver

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
)

// RuntimeEnv is the environment variable that selects where out-of-process
// drivers run: RuntimeLocal (the default) or a runtime registered with
// RegisterRuntime, such as "container" (matrix/driver/container).
const RuntimeEnv = "MATRIX_RUNTIME"

// RuntimeLocal runs out-of-process drivers as child processes, provisioned
// on this machine (a virtualenv, a Maven build); it is the registry itself.
const RuntimeLocal = "local"

// RuntimeLookup returns a runtime's opener for client, or false when the
// runtime leaves the client to the registry (an in-process Go driver).
type RuntimeLookup func(client string) (Opener, bool)

var (
	rtMu     sync.Mutex
	runtimes = map[string]RuntimeLookup{}
)

// RegisterRuntime makes a runtime selectable by name through RuntimeEnv.
// It panics on a duplicate name, a programming error found at init.
func RegisterRuntime(name string, lookup RuntimeLookup) {
	rtMu.Lock()
	defer rtMu.Unlock()
	if _, dup := runtimes[name]; dup || name == RuntimeLocal {
		panic("driver: duplicate registration of runtime " + name)
	}
	runtimes[name] = lookup
}

// SelectedRuntime returns the runtime named by RuntimeEnv, RuntimeLocal
// when it is unset.
func SelectedRuntime() string {
	if r := strings.TrimSpace(os.Getenv(RuntimeEnv)); r != "" {
		return r
	}
	return RuntimeLocal
}

// runtimeOpener returns the selected runtime's opener for client. A runtime
// that is not linked into this binary yields an opener that fails with the
// reason, so every cell says what is wrong.
func runtimeOpener(client string) (Opener, bool) {
	name := SelectedRuntime()
	if name == RuntimeLocal {
		return nil, false
	}
	rtMu.Lock()
	lookup, ok := runtimes[name]
	known := []string{RuntimeLocal}
	for n := range runtimes {
		known = append(known, n)
	}
	rtMu.Unlock()
	if !ok {
		sort.Strings(known[1:])
		return func(context.Context, string) (Driver, error) {
			return nil, fmt.Errorf("%s=%s: no such runtime in this binary (available: %s; the container runtime is linked by importing matrix/driver/container)",
				RuntimeEnv, name, strings.Join(known, ", "))
		}, true
	}
	return lookup(client)
}
