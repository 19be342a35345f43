package python

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/matrix/clients/provision"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// TestMissingPython checks the message a machine without python3 gets.
func TestMissingPython(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Ensure(context.Background())
	if !errors.Is(err, provision.ErrToolMissing) || !strings.Contains(err.Error(), "python3-venv") {
		t.Fatalf("err = %v, want ErrToolMissing naming python3-venv", err)
	}
}

// TestDriverHandshake provisions the virtualenv (pip on a cold cache, a
// few seconds), starts both clients' drivers and checks hello. Hello needs
// no broker: both drivers connect on their first Kafka command.
func TestDriverHandshake(t *testing.T) {
	if testing.Short() {
		t.Skip("provisions a virtualenv from PyPI on a cold cache")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err := Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ client, library, partitioner string }{
		{ConfluentClient, "confluent-kafka 2.16.1 (librdkafka 2.16", "consistent_random"},
		{KafkaPythonClient, "kafka-python 3.0.12", "murmur2"},
	} {
		start := time.Now()
		d, err := Opener(c.client)(ctx, "127.0.0.1:1")
		if err != nil {
			t.Fatalf("%s: %v", c.client, err)
		}
		t.Logf("%s: warm start (cache check, interpreter, hello) in %v", c.client, time.Since(start).Round(time.Millisecond))
		info := d.Info()
		if !strings.HasPrefix(info.Library, c.library) || !strings.HasPrefix(info.Partitioner, c.partitioner) {
			t.Errorf("%s: hello reported %+v, want library %q and partitioner %q", c.client, info, c.library, c.partitioner)
		}
		if err := d.Close(); err != nil {
			t.Errorf("%s: close: %v", c.client, err)
		}
	}
	// driver.py's own unit tests run in the same interpreter.
	cmd := exec.CommandContext(ctx, env.Python, "-m", "unittest", "-q", "driver_test")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python -m unittest driver_test: %v\n%s", err, out)
	}
}

// TestDriverRejectsWrongProtocol checks that a hello with another protocol
// version fails the start instead of running a mismatched driver.
func TestDriverRejectsWrongProtocol(t *testing.T) {
	if testing.Short() {
		t.Skip("provisions a virtualenv from PyPI on a cold cache")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, err := Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	spec := env.Spec(KafkaPythonClient)
	spec.Client = "someone-else"
	if _, err := driver.StartProcess(ctx, spec, "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "reports client") {
		t.Fatalf("StartProcess with the wrong client id: %v, want a client mismatch", err)
	}
}
