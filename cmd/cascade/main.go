// Command cascade runs one Cascade broker: a Kafka-compatible broker that any
// Kafka client can use unchanged.
//
// With no arguments it listens on 127.0.0.1:9092, keeps its data under
// ./data and creates topics on first use:
//
//	go run ./cmd/cascade
//	go run ./cmd/cascade -config server.properties --override num.partitions=3
//
// Properties use Apache Kafka's names, as kafka-server-start.sh takes them;
// a key Cascade does not honour stops it at start with a message naming the
// key. -print-apis prints the supported APIs and versions. The Cascade-specific cascade.admin.listener (host:port) serves
// Prometheus /metrics and /debug/pprof/. SIGINT or SIGTERM stops it cleanly:
// every log is flushed and closed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker"
	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/handler"
)

// apiTable renders the handler registry, which is exactly what ApiVersions
// advertises, as a Markdown table for the README.
func apiTable() string {
	var sb strings.Builder
	sb.WriteString("| Key | API | Versions |\n| ---: | --- | --- |\n")
	for _, a := range handler.APIs() {
		fmt.Fprintf(&sb, "| %d | %s | %d-%d |\n", a.Key, kmsg.NameForKey(a.Key), a.Min, a.Max)
	}
	return sb.String()
}

// overrides collects repeated --override key=value flags.
type overrides []string

func (o *overrides) String() string { return strings.Join(*o, " ") }
func (o *overrides) Set(v string) error {
	*o = append(*o, v)
	return nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cascade:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal, restore the default handling so that a
		// second one ends a stop that hangs.
		<-ctx.Done()
		stop()
	}()
	return serve(ctx, args, os.Stdout, os.Stderr)
}

// serve runs the broker that args describe until ctx is done, printing the
// banner to out and logs to logOut.
func serve(ctx context.Context, args []string, out, logOut io.Writer) error {
	fs := flag.NewFlagSet("cascade", flag.ContinueOnError)
	fs.SetOutput(logOut)
	path := fs.String("config", "", "a server.properties file with Kafka broker properties")
	var ov overrides
	fs.Var(&ov, "override", "a property `key=value` applied after the file; repeatable")
	verbose := fs.Bool("v", false, "log at debug level")
	printAPIs := fs.Bool("print-apis", false, "print the supported APIs and versions as a Markdown table and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *printAPIs {
		fmt.Fprint(out, apiTable())
		return nil
	}
	if fs.NArg() > 0 {
		// kafka-server-start.sh takes the file as its first argument.
		if *path != "" || fs.NArg() > 1 {
			return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
		}
		*path = fs.Arg(0)
	}
	cfg, err := config.Load(*path, ov)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: level}))

	admin, _ := cfg.IsSet("cascade.admin.listener")
	b, err := broker.Start(ctx, broker.Config{Broker: cfg, Logger: logger, AdminListener: admin})
	if err != nil {
		return err
	}
	dirs := make([]string, len(cfg.LogDirs))
	for i, d := range cfg.LogDirs {
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		dirs[i] = d
	}
	if cfg.Cluster.Roles.Broker {
		fmt.Fprintf(out, "Cascade is running.\n  bootstrap address: %s\n  data dir:          %s\n", b.Addr(), strings.Join(dirs, ","))
	} else {
		fmt.Fprintf(out, "Cascade controller is running.\n  controller listener: %s\n  data dir:            %s\n", b.Addr(), strings.Join(dirs, ","))
	}
	if a := b.AdminAddr(); a != "" {
		fmt.Fprintf(out, "  metrics:           http://%s/metrics\n  pprof:             http://%s/debug/pprof/\n", a, a)
	}
	fmt.Fprintln(out, "Press Ctrl-C to stop.")
	<-ctx.Done()
	fmt.Fprintln(out, "Stopping...")
	if err := b.Close(); err != nil {
		return errors.Join(errors.New("stopping"), err)
	}
	fmt.Fprintln(out, "Stopped; all data flushed.")
	return nil
}
