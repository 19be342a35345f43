//go:build cgo

package clienttest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

func init() { childMain = confluentChild }

// confluentChild is a librdkafka group member in its own process (this
// test binary started with childEnv = "bootstrap group topic"): it prints
// "V <value>" for every record, commits it synchronously, and closes
// (LeaveGroup) when its stdin ends. Killing the process is a real crash.
func confluentChild() int {
	args := strings.Fields(os.Getenv(childEnv))
	if len(args) != 3 {
		fmt.Fprintf(os.Stderr, "%s: want \"bootstrap group topic\", got %q\n", childEnv, os.Getenv(childEnv))
		return 2
	}
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": args[0], "group.id": args[1],
		"session.timeout.ms": int(sessionTimeout.Milliseconds()), "heartbeat.interval.ms": 100,
		"partition.assignment.strategy": "range", "enable.auto.commit": false, "auto.offset.reset": "earliest",
		"fetch.wait.max.ms": 100, "broker.address.family": "v4", "log_level": 3})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := c.Subscribe(args[2], nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	quit := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // Ends when the parent closes stdin.
		close(quit)
	}()
	for {
		select {
		case <-quit:
			if err := c.Close(); err != nil {
				fmt.Fprintln(os.Stderr, "close:", err)
				return 1
			}
			return 0
		default:
		}
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			fmt.Printf("V %s\n", e.Value)
			if _, err := c.CommitMessage(e); err != nil {
				fmt.Fprintln(os.Stderr, "commit:", err) // A rebalance may refuse it; the next owner reads again.
			}
		case kafka.Error:
			fmt.Fprintln(os.Stderr, "consumer:", e)
		}
	}
}

// confluentMember is a confluentChild process.
type confluentMember struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	read  chan struct{}
	once  sync.Once
}

func startConfluent(t *testing.T, b *brokertest.Broker, group, topic string, s *seen) member {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+b.Addr()+" "+group+" "+topic)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &confluentMember{cmd: cmd, stdin: stdin, read: make(chan struct{})}
	go func() {
		defer close(m.read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "V "); ok {
				s.add(v)
			}
		}
	}()
	t.Cleanup(m.leave)
	return m
}

// end stops the process with stop and reaps it.
func (m *confluentMember) end(stop func() error) {
	m.once.Do(func() {
		if err := stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop member:", err)
		}
		<-m.read
		done := make(chan error, 1)
		go func() { done <- m.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = m.cmd.Process.Kill()
			<-done
		}
	})
}

func (m *confluentMember) leave() { m.end(m.stdin.Close) }
func (m *confluentMember) crash() { m.end(m.cmd.Process.Kill) }

// TestConfluentGroupStory runs the package's story with librdkafka
// members, each in its own process, so that the crash is a SIGKILL.
func TestConfluentGroupStory(t *testing.T) { runGroupStory(t, startConfluent) }
