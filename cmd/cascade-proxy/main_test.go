package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestRunServesAPI(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuf
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-api", api, "-seed", "5", "-proxy", "k=127.0.0.1:0=127.0.0.1:9"}, &out)
	}()
	var resp *http.Response
	for i := 0; i < 100; i++ {
		resp, err = http.Get("http://" + api + "/proxies")
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(out.String(), "seed 5") || !strings.Contains(out.String(), "proxy k:") {
		t.Fatalf("status %d, output %q", resp.StatusCode, out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"-proxy", "bad"}, &out); err == nil {
		t.Fatal("accepted a malformed -proxy")
	}
}
