package netns

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// helperEnv makes the test binary, started inside a namespace, a tiny echo
// server (listen=ADDR) or a one-shot client (dial=ADDR) instead of running
// tests.
const helperEnv = "CASCADE_NETNS_HELPER"

func TestMain(m *testing.M) {
	if v := os.Getenv(helperEnv); v != "" {
		os.Exit(helper(v))
	}
	os.Exit(m.Run())
}

func helper(v string) int {
	mode, addr, _ := strings.Cut(v, "=")
	switch mode {
	case "listen":
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("listening")
		for {
			c, err := ln.Accept()
			if err != nil {
				return 1
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprint(c, line)
			}()
		}
	case "dial":
		if err := echo(addr); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("ok")
		return 0
	}
	return 2
}

// echo sends one line to addr and reads it back, within a second.
func echo(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprintln(c, "ping"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return fmt.Errorf("echo answered %q", line)
	}
	return nil
}

func TestPartitions(t *testing.T) {
	nw := newNetwork(t, 3)
	// An echo server on node 2.
	server := nw.Node(2).IP + ":7070"
	srv := nw.Command(2, os.Args[0])
	srv.Env = append(os.Environ(), helperEnv+"=listen="+server)
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "listening\n" {
		t.Fatalf("echo server: %q %v", line, err)
	}
	dialFrom := func(node int) error {
		c := nw.Command(node, os.Args[0])
		c.Env = append(os.Environ(), helperEnv+"=dial="+server)
		b, err := c.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, b)
		}
		return nil
	}
	reach := func(what string, want bool, err error) {
		t.Helper()
		if (err == nil) != want {
			t.Fatalf("%s: reachable %v, want %v (%v)", what, err == nil, want, err)
		}
	}
	reach("node 1 to node 2", true, dialFrom(1))
	reach("host to node 2", true, echo(server))

	// A connection open across the cut goes silent rather than failing.
	open, err := net.DialTimeout("tcp", server, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := nw.Isolate(2); err != nil {
		t.Fatal(err)
	}
	reach("node 1 to isolated node 2", false, dialFrom(1))
	reach("node 3 to isolated node 2", false, dialFrom(3))
	reach("host to isolated node 2", true, echo(server))
	if got := len(nw.Cuts()); got != 2 {
		t.Fatalf("cuts after isolating node 2: %v", nw.Cuts())
	}

	if err := nw.Cut(0, 2); err != nil {
		t.Fatal(err)
	}
	reach("host to node 2 cut from clients", false, echo(server))
	open.SetDeadline(time.Now().Add(time.Second))
	fmt.Fprintln(open, "ping")
	if _, err := bufio.NewReader(open).ReadString('\n'); err == nil {
		t.Fatal("a connection opened before the cut still answered")
	} else if ne := (net.Error)(nil); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a connection across the cut failed with %v, want a timeout", err)
	}

	if err := nw.Heal(); err != nil {
		t.Fatal(err)
	}
	reach("node 1 to node 2 after heal", true, dialFrom(1))
	reach("host to node 2 after heal", true, echo(server))
}

func TestRefusesBadCuts(t *testing.T) {
	nw := &Network{nodes: []*Node{{}, {}}, cuts: map[[2]int]bool{}}
	for _, c := range [][2]int{{1, 1}, {0, 0}, {-1, 1}, {1, 3}} {
		if err := nw.Cut(c[0], c[1]); err == nil {
			t.Errorf("Cut(%d, %d) accepted", c[0], c[1])
		}
	}
}
