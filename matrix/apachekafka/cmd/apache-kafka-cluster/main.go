// Command apache-kafka-cluster starts a multi-node Apache Kafka KRaft
// cluster in the foreground from the jars the matrix uses
// (matrix/apachekafka), prints its bootstrap list and nodes, and then takes
// commands on standard input to crash and heal nodes by hand:
//
//	go run ./matrix/apachekafka/cmd/apache-kafka-cluster -nodes 3
//	> controller        # the active controller (DescribeQuorum)
//	> kill 2            # SIGKILL node 2; also stop, pause, resume, restart
//	> leader t 0        # leader and ISR of partition t/0
//
// Ctrl-C, "quit" or the end of standard input kills every node and removes
// a temporary directory.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cascade-kafka/cascade/matrix/apachekafka"
)

type overrides map[string]string

func (o overrides) String() string { return fmt.Sprint(map[string]string(o)) }
func (o overrides) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("override %q is not key=value", v)
	}
	o[k] = val
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "apache-kafka-cluster: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, in io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("apache-kafka-cluster", flag.ContinueOnError)
	nodes := fs.Int("nodes", 3, "number of nodes running a broker")
	dedicated := fs.Bool("dedicated-controllers", false, "run three controller-only nodes (ids 1-3) besides the brokers")
	dir := fs.String("d", "", "`dir` for the nodes' directories (default: a temporary one, removed on exit)")
	heap := fs.String("heap", "384m", "JVM -Xmx of each node")
	ov := overrides{}
	fs.Var(ov, "override", "`key=value` server.properties entry for every node (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := apachekafka.ClusterOptions{Nodes: *nodes, Overrides: ov, Dir: *dir, Heap: *heap}
	if *dedicated {
		opts.Roles = apachekafka.DedicatedControllers
	}
	start := time.Now()
	c, err := apachekafka.StartCluster(ctx, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(out, "Apache Kafka %s cluster %s started in %v (dir %s)\n", c.Version(), c.ClusterID(),
		time.Since(start).Round(time.Millisecond), c.Dir())
	for _, n := range c.Nodes() {
		fmt.Fprintf(out, "  node %d %-17s broker %-21s controller %-21s log %s\n", n.ID, n.Roles, n.Addr, n.ControllerAddr, n.LogPath())
	}
	fmt.Fprintf(out, "bootstrap %s\ncommands: controller, leader TOPIC PARTITION, kill|stop|pause|resume|restart ID, quit\n", c.Bootstrap())

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			quit, err := command(ctx, c, strings.Fields(line), out)
			if err != nil {
				fmt.Fprintf(out, "error: %v\n", err)
			}
			if quit {
				return nil
			}
		}
	}
}

// command runs one line of input and reports whether it asked to quit.
func command(ctx context.Context, c *apachekafka.Cluster, f []string, out io.Writer) (bool, error) {
	if len(f) == 0 {
		return false, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	switch f[0] {
	case "quit", "exit":
		return true, nil
	case "controller":
		q, err := c.ActiveController(cctx)
		if err != nil {
			return false, err
		}
		fmt.Fprintf(out, "active controller %d, epoch %d, high watermark %d, voters %v\n", q.LeaderID, q.LeaderEpoch, q.HighWatermark, q.Voters)
		return false, nil
	case "leader":
		if len(f) != 3 {
			return false, errors.New("usage: leader TOPIC PARTITION")
		}
		p, err := strconv.ParseInt(f[2], 10, 32)
		if err != nil {
			return false, err
		}
		ps, err := c.Partition(cctx, f[1], int32(p))
		if err != nil {
			return false, err
		}
		fmt.Fprintf(out, "%s/%d leader %d epoch %d replicas %v ISR %v\n", ps.Topic, ps.Partition, ps.Leader, ps.LeaderEpoch, ps.Replicas, ps.ISR)
		return false, nil
	}
	if len(f) != 2 {
		return false, fmt.Errorf("unknown command %q", strings.Join(f, " "))
	}
	id, err := strconv.Atoi(f[1])
	if err != nil {
		return false, err
	}
	begin := time.Now()
	switch f[0] {
	case "kill":
		err = c.Kill(id)
	case "stop":
		err = c.Stop(id)
	case "pause":
		err = c.Pause(id)
	case "resume":
		err = c.Resume(id)
	case "restart":
		err = c.Restart(cctx, id)
	default:
		return false, fmt.Errorf("unknown command %q", f[0])
	}
	if err == nil {
		fmt.Fprintf(out, "%s %d: done in %v\n", f[0], id, time.Since(begin).Round(time.Millisecond))
	}
	return false, err
}
