// Command cascade-proxy runs the Kafka-aware fault-injecting proxy with
// toxiproxy's HTTP control API.
//
//	cascade-proxy -seed 42 -proxy kafka=127.0.0.1:19092=127.0.0.1:9092
//	toxiproxy-cli toxic add -t latency -a latency=100 kafka   # or curl the API
//
// Each -proxy NAME=LISTEN=UPSTREAM (repeatable) or entry of -config (a JSON
// array of {"name","listen","upstream"}, toxiproxy's format) starts one
// listener; brokers found in metadata get their own listener on
// -listen-host. The seed (printed at start) derives every random choice, so
// a run with the same seed and traffic injects the same faults.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cascade-kafka/cascade/faults/proxy"
)

type proxyFlags []string

func (p *proxyFlags) String() string     { return strings.Join(*p, ",") }
func (p *proxyFlags) Set(v string) error { *p = append(*p, v); return nil }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "cascade-proxy: %v\n", err)
		os.Exit(1)
	}
}

type spec struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	Enabled  *bool  `json:"enabled"`
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("cascade-proxy", flag.ContinueOnError)
	api := fs.String("api", "127.0.0.1:8474", "`host:port` of the HTTP control API (toxiproxy's default port)")
	seed := fs.Uint64("seed", 0, "seed for every random choice; 0 picks one from the clock and prints it")
	config := fs.String("config", "", "JSON `file` with an array of proxies, as toxiproxy's -config")
	listenHost := fs.String("listen-host", "127.0.0.1", "host for listeners of brokers discovered in metadata")
	noDiscover := fs.Bool("no-discover", false, "pass unknown broker addresses through instead of proxying them")
	var proxies proxyFlags
	fs.Var(&proxies, "proxy", "`NAME=LISTEN=UPSTREAM` proxy to start (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano())
	}
	var specs []spec
	if *config != "" {
		b, err := os.ReadFile(*config)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &specs); err != nil {
			return fmt.Errorf("%s: %w", *config, err)
		}
	}
	for _, p := range proxies {
		parts := strings.SplitN(p, "=", 3)
		if len(parts) != 3 {
			return fmt.Errorf("-proxy %q: want NAME=LISTEN=UPSTREAM", p)
		}
		specs = append(specs, spec{Name: parts[0], Listen: parts[1], Upstream: parts[2]})
	}
	g := proxy.NewGroup(proxy.Options{Seed: *seed, ListenHost: *listenHost, NoDiscover: *noDiscover})
	defer g.Close()
	for _, s := range specs {
		p, err := g.Add(s.Name, s.Listen, s.Upstream)
		if err != nil {
			return err
		}
		if s.Enabled != nil && !*s.Enabled {
			p.SetEnabled(false)
		}
		fmt.Fprintf(out, "proxy %s: %s -> %s\n", p.Name(), p.Addr(), p.Upstream())
	}
	ln, err := net.Listen("tcp", *api)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: g.Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(out, "seed %d; control API on http://%s; toxic types: %s\n", *seed, ln.Addr(), strings.Join(proxy.ToxicTypes(), ", "))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		slog.Info("cascade-proxy: shutting down")
		return srv.Shutdown(sctx)
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
