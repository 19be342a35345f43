// Command cascade-lincheck checks a recorded history of Kafka operations
// (the JSON-lines format of linearizability/README.md).
//
//	cascade-lincheck [-html FILE] [-timeout D] HISTORY.jsonl
//
// It exits 0 when the history is valid, 1 with the anomalies listed when it
// is not (a linearizability check that timed out counts as not valid), and 2
// when the file cannot be read or parsed. With -html it writes porcupine's
// visualization of the first partition found not linearizable.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cascade-kafka/cascade/linearizability"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cascade-lincheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	html := fs.String("html", "", "write porcupine's visualization of the failing partition to `FILE`")
	timeout := fs.Duration("timeout", time.Minute, "bound on the linearizability check; undecided partitions are reported unknown")
	maxPer := fs.Int("max", 100, "anomalies listed per kind")
	stale := fs.Bool("stale-reads", false, "let high watermarks trail the log, as a cluster's do")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: cascade-lincheck [-html FILE] [-timeout D] [-stale-reads] HISTORY.jsonl")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	start := time.Now()
	h, err := linearizability.ReadFile(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "cascade-lincheck: %v\n", err)
		return 2
	}
	rep, err := linearizability.Check(h, linearizability.Options{Timeout: *timeout, MaxPerKind: *maxPer, StaleReads: *stale})
	if err != nil {
		fmt.Fprintf(stderr, "cascade-lincheck: %v\n", err)
		return 2
	}
	fmt.Fprint(stdout, rep.Summary())
	fmt.Fprintf(stdout, "checked in %v\n", time.Since(start).Round(time.Millisecond))
	if *html != "" && rep.Failing != "" {
		f, err := os.Create(*html)
		if err == nil {
			err = linearizability.Visualize(h, rep.Failing, linearizability.Options{Timeout: *timeout, StaleReads: *stale}, f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "cascade-lincheck: writing %s: %v\n", *html, err)
		} else {
			fmt.Fprintf(stdout, "visualization of %s written to %s\n", rep.Failing, *html)
		}
	}
	if !rep.Valid() {
		return 1
	}
	return 0
}
