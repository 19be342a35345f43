package matrix_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/cascade-kafka/cascade/matrix"
	"github.com/cascade-kafka/cascade/matrix/cascadecluster"
	"github.com/cascade-kafka/cascade/matrix/driver"
	"github.com/cascade-kafka/cascade/matrix/driver/confluent"
	"github.com/cascade-kafka/cascade/matrix/driver/franzgo"
	"github.com/cascade-kafka/cascade/matrix/driver/sarama"
)

// processClient runs the franz-go driver out of process, through the
// line-delimited JSON protocol, with this test binary as the driver
// program. It checks the protocol end to end against real brokers; it is
// not in the default client list (select it with MATRIX_CLIENTS).
const processClient = "franz-go-process"

func init() {
	driver.Register(processClient, driver.ProcessOpener(driver.ProcessSpec{
		Client: processClient,
		Argv:   []string{os.Args[0], "-test.run=^$"},
		Env:    []string{"MATRIX_TEST_SERVE_DRIVER=" + processClient},
	}))
	// Crash cells kill a driver process; the in-process Go drivers run
	// for them in a child started from this test binary.
	matrix.ProcessOpener = func(client string) (driver.Opener, bool) {
		switch client {
		case franzgo.Client, sarama.Client, confluent.Client:
			return driver.ProcessOpener(driver.ProcessSpec{
				Client: client,
				Argv:   []string{os.Args[0], "-test.run=^$"},
				Env:    []string{"MATRIX_TEST_SERVE_DRIVER=" + client},
			}), true
		}
		return nil, false
	}
}

// TestMain serves a Go driver over the protocol when started as a driver
// program (MATRIX_TEST_SERVE_DRIVER names the client), else runs the tests.
func TestMain(m *testing.M) {
	if client := os.Getenv("MATRIX_TEST_SERVE_DRIVER"); client != "" {
		open := driver.Opener(franzgo.Open)
		if client != processClient {
			var ok bool
			if open, ok = driver.Lookup(client); !ok {
				fmt.Fprintf(os.Stderr, "no driver registered for %q\n", client)
				os.Exit(1)
			}
		}
		if err := driver.Serve(context.Background(), client, open, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if err := cascadecluster.Cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// defaultClients is every registered client except the protocol check.
func defaultClients() []string {
	var out []string
	for _, c := range driver.Clients() {
		if c != processClient {
			out = append(out, c)
		}
	}
	return out
}
