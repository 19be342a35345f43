package container

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

// TestContextHashMatchesScript holds ImageTag and ci/docker-setup.sh's
// context_hash equal, so that the images the script builds are the ones
// the runtime looks for.
func TestContextHashMatchesScript(t *testing.T) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		t.Skip("sha256sum not installed; the script's hash cannot be computed here")
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for name, im := range map[string]*Image{"python": Python, "java": Java} {
		tag, err := im.ImageTag(root)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", filepath.Join(root, "ci", "docker-setup.sh"), "--context-hash", name)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ci/docker-setup.sh --context-hash %s: %v", name, err)
		}
		if want := im.Repo + ":" + strings.TrimSpace(string(out)); tag != want {
			t.Errorf("%s: ImageTag %s, ci/docker-setup.sh %s", name, tag, want)
		}
	}
}

// TestContextHashCoversInputs checks that the hash changes with a file's
// contents and with its path, and not with the order files are listed in.
func TestContextHashCoversInputs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hash := func(files ...string) string {
		t.Helper()
		h, err := ContextHash(dir, files)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	write("a/x", "one")
	write("b", "two")
	base := hash("a/x", "b")
	if len(base) != 12 {
		t.Fatalf("hash %q, want 12 hex digits", base)
	}
	if got := hash("b", "a/x"); got != base {
		t.Errorf("order changed the hash: %s vs %s", got, base)
	}
	write("b", "two!")
	if got := hash("a/x", "b"); got == base {
		t.Error("a changed file kept the hash")
	}
	write("c", "two!")
	if hash("a/x", "c") == hash("a/x", "b") {
		t.Error("a renamed file kept the hash")
	}
	if _, err := ContextHash(dir, []string{"missing"}); err == nil {
		t.Error("a missing input hashed without error")
	}
}

// TestRuntimeSelection checks how driver.Lookup follows MATRIX_RUNTIME: the
// container runtime takes the out-of-process clients, leaves Go clients to
// the registry, and an unknown runtime fails with a message.
func TestRuntimeSelection(t *testing.T) {
	t.Setenv(driver.RuntimeEnv, Name)
	if _, ok := driver.Lookup("java"); !ok {
		t.Error("container runtime does not serve java")
	}
	if _, ok := driver.Lookup("franz-go"); ok {
		t.Error("container runtime claims franz-go, which is not registered in this test binary")
	}
	t.Setenv(driver.RuntimeEnv, "nonesuch")
	open, ok := driver.Lookup("franz-go")
	if !ok {
		t.Fatal("an unknown runtime should yield a failing opener")
	}
	if _, err := open(context.Background(), "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "nonesuch") {
		t.Errorf("unknown runtime: %v", err)
	}
}

// engineOrSkip runs the rest of a test only in the container runtime with a
// reachable engine.
func engineOrSkip(t *testing.T) client.APIClient {
	t.Helper()
	if driver.SelectedRuntime() != Name {
		t.Skipf("container runtime tests need %s=%s and a Docker engine (ci/docker-setup.sh)", driver.RuntimeEnv, Name)
	}
	cli, err := Engine(context.Background())
	if err != nil {
		t.Fatal(err) // The runtime was asked for: a missing engine is a failure.
	}
	return cli
}

// leftovers lists the containers this process started that still exist
// (other packages' tests may run driver containers at the same time).
func leftovers(t *testing.T, cli client.APIClient) []string {
	t.Helper()
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelSession+"="+session),
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range res.Items {
		ids = append(ids, shortID(c.ID)+" "+string(c.State))
	}
	return ids
}

func waitNoLeftovers(t *testing.T, cli client.APIClient) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := leftovers(t, cli)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("containers left behind: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDriversInContainers runs each containerised client through the
// protocol against an in-memory Kafka (kfake) on loopback: hello, produce,
// consume byte for byte, list offsets; then checks that Close removed
// every container.
func TestDriversInContainers(t *testing.T) {
	cli := engineOrSkip(t)
	clients := []string{"python-confluent-kafka", "python-kafka-python", "java"}
	var topics []string
	for _, c := range clients {
		topics = append(topics, "t-"+c)
	}
	// Topics are seeded: kfake's CreateTopics answers config sources that
	// the Python and Java admin clients refuse, and admin is the matrix's
	// business, not this runtime's.
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bootstrap := c.ListenAddrs()[0]
	for _, client := range clients {
		t.Run(client, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			start := time.Now()
			d, err := Start(ctx, Specs[client], bootstrap)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			t.Logf("%s (%s) answered hello in %v", client, d.Info().Library, time.Since(start).Round(time.Millisecond))
			topic := "t-" + client
			recs := []driver.Record{
				{Partition: 0, Key: []byte("k"), Value: []byte("v1"), Headers: []driver.Header{{Key: "h", Value: []byte("hv")}}},
				{Partition: 0, Key: nil, Value: []byte{0, 1, 2, 255}},
			}
			pr, err := d.Produce(ctx, driver.Produce{Topic: topic, Acks: -1, Records: recs})
			if err != nil {
				t.Fatal(err)
			}
			for i, dl := range pr.Deliveries {
				if dl.Error != nil || dl.Offset != int64(i) {
					t.Fatalf("delivery %d: %+v", i, dl)
				}
			}
			cr, err := d.Consume(ctx, driver.Consume{Topic: topic, Partition: 0, From: 0, Count: 2, TimeoutMs: 15000})
			if err != nil {
				t.Fatal(err)
			}
			if lo, err := d.ListOffsets(ctx, driver.ListOffsets{Topic: topic, Partition: 0, Kind: "latest"}); err != nil || lo.Offset != 2 {
				t.Errorf("list_offsets latest: %+v, %v; want 2", lo, err)
			}
			if len(cr.Records) != 2 {
				t.Fatalf("consumed %d records, want 2: %+v", len(cr.Records), cr)
			}
			for i, r := range cr.Records {
				if !bytes.Equal(r.Key, recs[i].Key) || (r.Key == nil) != (recs[i].Key == nil) || !bytes.Equal(r.Value, recs[i].Value) || r.Offset != int64(i) {
					t.Errorf("record %d: got key %q value %q offset %d, want key %q value %q", i, r.Key, r.Value, r.Offset, recs[i].Key, recs[i].Value)
				}
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
	waitNoLeftovers(t, cli)
}

// TestContainerKilledOnCancel cancels a command mid-flight: the runtime
// kills the container, the driver reports the cancellation, and the
// container is gone after Close, as a killed local process would be.
func TestContainerKilledOnCancel(t *testing.T) {
	cli := engineOrSkip(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "idle"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := Start(ctx, Specs["python-kafka-python"], c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
	defer ccancel()
	// Nothing is ever produced to "idle": the consume would wait 60 s.
	_, err = d.Consume(cctx, driver.Consume{Topic: "idle", Partition: 0, From: 0, Count: 1, TimeoutMs: 60000})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("consume after cancel: %v, want a deadline error", err)
	}
	if _, err := d.DescribeTopic(ctx, "idle"); err == nil {
		t.Error("a killed driver still answered")
	}
	if err := d.Close(); err != nil {
		t.Logf("close after kill: %v", err)
	}
	waitNoLeftovers(t, cli)
}

// TestNoEngineMessage checks that a missing engine names the set-up script
// and the way back to local processes.
func TestNoEngineMessage(t *testing.T) {
	err := noEngine(errors.New("dial unix /var/run/docker.sock: connect: no such file or directory"))
	if !errors.Is(err, ErrNoEngine) {
		t.Fatalf("%v does not wrap ErrNoEngine", err)
	}
	for _, want := range []string{"ci/docker-setup.sh", "MATRIX_RUNTIME", "no such file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

// TestHelloFailureRemovesContainer starts a driver that cannot answer hello
// as the client it was started for: Start fails with the driver's own
// message and the container is gone.
func TestHelloFailureRemovesContainer(t *testing.T) {
	cli := engineOrSkip(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := Spec{Client: "python-kafka-python", Image: Python, Args: []string{"no-such-client"}}
	d, err := Start(ctx, spec, "127.0.0.1:1")
	if err == nil {
		d.Close()
		t.Fatal("a driver started for an unknown client id answered hello")
	}
	t.Logf("start failed as expected: %v", err)
	waitNoLeftovers(t, cli)
}

// TestPythonImageHasEveryDriverModule holds the Python image's inputs (and
// so docker/python.Dockerfile's COPY, which lists the same files) to every
// module of the driver program, so splitting driver.py cannot leave the
// container without a module it imports.
func TestPythonImageHasEveryDriverModule(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	inputs, err := Python.Inputs(root)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range inputs {
		have[f] = true
	}
	mods, err := filepath.Glob(filepath.Join(root, "matrix/clients/python/*.py"))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile, err := os.ReadFile(filepath.Join(root, "docker/python.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		rel := filepath.ToSlash(strings.TrimPrefix(m, root+string(filepath.Separator)))
		if strings.HasSuffix(rel, "_test.py") {
			continue
		}
		if !have[rel] {
			t.Errorf("%s is not an input of the Python image (image.go, ci/docker-setup.sh)", rel)
		}
		if !bytes.Contains(dockerfile, []byte(rel)) {
			t.Errorf("docker/python.Dockerfile does not copy %s", rel)
		}
	}
}
