package matrix_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/cascade-kafka/cascade/matrix/driver"
	"github.com/cascade-kafka/cascade/matrix/driver/franzgo"
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
		Env:    []string{"MATRIX_TEST_SERVE_DRIVER=1"},
	}))
}

func TestMain(m *testing.M) {
	if os.Getenv("MATRIX_TEST_SERVE_DRIVER") != "" {
		if err := driver.Serve(context.Background(), processClient, franzgo.Open, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
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
