package quorum

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"testing/cryptotest"

	"github.com/cockroachdb/datadriven"
)

// TestInteraction runs the scripts under testdata/: scripted scenarios on
// the simulated network, without loss or delay, with the output of each
// command checked. Regenerate the expected output with -rewrite.
//
// Commands:
//
//	cluster voters=3 [snapshot=20 retain=3]
//	campaign id=1
//	tick n=10 [id=1]           ticks all nodes (or one) n times, delivering in between
//	propose id=1 data=x
//	stabilize                  delivers until no message is in flight
//	partition a=(1) b=(2,3)    cuts every link between the groups
//	heal
//	crash id=1 / restart id=1
//	status                     each node's raft state
//	log id=1                   what node 1's application applied
func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		cryptotest.SetGlobalRandom(t, 1)
		var s *sim
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if s == nil && d.Cmd != "cluster" {
				d.Fatalf(t, "no cluster yet")
			}
			out := interact(t, d, &s)
			if s != nil && s.err != nil {
				d.Fatalf(t, "%v", s.err)
			}
			return out
		})
	})
}

func idArg(t *testing.T, d *datadriven.TestData) uint64 {
	var id uint64
	d.ScanArgs(t, "id", &id)
	return id
}

func idsArg(t *testing.T, d *datadriven.TestData, key string) []uint64 {
	arg, ok := d.Arg(key)
	if !ok {
		d.Fatalf(t, "missing %s", key)
	}
	var ids []uint64
	for _, v := range arg.Vals {
		id, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			d.Fatalf(t, "%s: %v", key, err)
		}
		ids = append(ids, id)
	}
	return ids
}

func interact(t *testing.T, d *datadriven.TestData, sp **sim) string {
	s := *sp
	switch d.Cmd {
	case "cluster":
		var n int
		d.ScanArgs(t, "voters", &n)
		snap, retain := uint64(20), uint64(3)
		d.MaybeScanArgs(t, "snapshot", &snap)
		d.MaybeScanArgs(t, "retain", &retain)
		*sp = newSimWith(t, 1, n, t.TempDir(), func(s *sim) {
			s.trace, s.snapEntries, s.retain = true, snap, retain
		})
		return s0((*sp).flush())
	case "campaign":
		if err := s.nodes[idArg(t, d)].core.Campaign(); err != nil {
			return err.Error()
		}
		return s.drain()
	case "tick":
		n := 1
		d.MaybeScanArgs(t, "n", &n)
		var only uint64
		d.MaybeScanArgs(t, "id", &only)
		for range n {
			for _, id := range s.ids {
				if nd := s.nodes[id]; nd != nil && (only == 0 || id == only) {
					nd.core.Tick()
				}
			}
			s.settle()
		}
		return s0(s.flush())
	case "propose":
		var data string
		d.ScanArgs(t, "data", &data)
		n := s.nodes[idArg(t, d)]
		id, err := n.core.Propose([]byte(data))
		if err != nil {
			return err.Error()
		}
		s.process(n)
		return fmt.Sprintf("proposal %d\n%s", id, s0(s.flush()))
	case "stabilize":
		return s.drain()
	case "partition":
		s.partition(idsArg(t, d, "a"), idsArg(t, d, "b"))
		return "ok"
	case "heal":
		s.heal()
		return "ok"
	case "crash":
		s.crash(idArg(t, d))
		return "ok"
	case "restart":
		s.restart(idArg(t, d))
		n := s.nodes[idArg(t, d)]
		if n != nil {
			s.process(n)
		}
		return s0(s.flush())
	case "status":
		var b strings.Builder
		for _, id := range s.ids {
			n := s.nodes[id]
			if n == nil {
				fmt.Fprintf(&b, "%d: down\n", id)
				continue
			}
			st := n.core.Status()
			first, _ := n.core.st.FirstIndex()
			last, _ := n.core.st.LastIndex()
			fmt.Fprintf(&b, "%d: %v term %d leader %d commit %d log [%d,%d]\n", id, st.RaftState, st.GetTerm(), st.Lead, st.GetCommit(), first, last)
		}
		return b.String()
	case "log":
		var b strings.Builder
		for _, e := range s.nodes[idArg(t, d)].app.entries {
			fmt.Fprintf(&b, "%d@%d %s\n", e.Index, e.Term, e.Data)
		}
		return s0(b.String())
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// s0 shows an empty output as "ok".
func s0(out string) string {
	if out == "" {
		return "ok"
	}
	return out
}

// settle delivers what is in flight, once, and runs every Ready.
func (s *sim) settle() {
	due := s.net
	s.net = nil
	for _, f := range due {
		s.deliver(f.m)
	}
	for _, id := range s.ids {
		if n := s.nodes[id]; n != nil {
			s.process(n)
		}
	}
}

// drain settles until nothing is in flight and returns the events.
func (s *sim) drain() string {
	for i := 0; i < 1000 && s.err == nil; i++ {
		s.settle()
		if len(s.net) == 0 {
			break
		}
	}
	return s0(s.flush())
}

func (s *sim) flush() string {
	out := strings.Join(s.events, "\n")
	s.events = nil
	return out
}
