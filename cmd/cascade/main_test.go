package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRunRefusesUnknownKey(t *testing.T) {
	err := run([]string{"--override", "no.such.key=1"})
	if err == nil || !strings.Contains(err.Error(), "no.such.key") {
		t.Fatalf("unknown key: %v", err)
	}
	err = run([]string{"--override", "num.partitions=zero"})
	if err == nil || !strings.Contains(err.Error(), "num.partitions") {
		t.Fatalf("malformed value: %v", err)
	}
	if err := run([]string{"-config", "/nonexistent/server.properties"}); err == nil {
		t.Fatal("missing config file accepted")
	}
}

func TestAPITable(t *testing.T) {
	tab := apiTable()
	for _, want := range []string{"| 0 | Produce | 0-13 |", "| 1 | Fetch | 4-18 |", "| 18 | ApiVersions | 0-5 |"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
}

// TestREADMEAPITable holds the README's table of supported APIs equal to
// what the registry advertises; regenerate it with `cascade -print-apis`.
func TestREADMEAPITable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), apiTable()) {
		t.Errorf("README.md's API table is out of date; replace it with the output of go run ./cmd/cascade -print-apis:\n%s", apiTable())
	}
}

// syncBuffer collects output written by the broker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeKafkaStockFile runs the command as `cascade -config
// server.properties` with Apache Kafka's stock file, overriding only the
// client port (a free one) and the log dir, as a user would, and checks a
// client is served and the broker stops cleanly.
func TestServeKafkaStockFile(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, logs syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, []string{"-config", "../../broker/config/testdata/kafka-server.properties",
			"--override", "listeners=PLAINTEXT://" + addr + ",CONTROLLER://:9093",
			"--override", "advertised.listeners=PLAINTEXT://" + addr + ",CONTROLLER://localhost:9093",
			"--override", "log.dirs=" + t.TempDir()}, &out, &logs)
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		_, err := kmsg.NewPtrApiVersionsRequest().RequestWith(rctx, cl)
		rcancel()
		if err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("cascade stopped: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer on %s: %v\n%s", addr, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "bootstrap address: "+addr) {
		t.Errorf("banner:\n%s", out.String())
	}
	if !strings.Contains(logs.String(), "controller listener not served") {
		t.Errorf("logs:\n%s", logs.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("cascade did not stop")
	}
	if !strings.Contains(out.String(), "Stopped; all data flushed.") {
		t.Errorf("banner:\n%s", out.String())
	}
}
