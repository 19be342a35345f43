package netns

import (
	"errors"
	"fmt"
	"time"
)

// inner is the node's side of its veth pair, inside its namespace.
const inner = "eth0"

// pairKey is a node pair, lower node first.
func pairKey(a, b int) [2]int { return [2]int{min(a, b), max(a, b)} }

// checkPair refuses a pair that is not two distinct nodes.
func (nw *Network) checkPair(what string, a, b int) error {
	if a == b || a < 1 || b < 1 || a > len(nw.nodes) || b > len(nw.nodes) {
		return fmt.Errorf("netns: cannot %s %d and %d: want two distinct nodes of 1 to %d", what, a, b, len(nw.nodes))
	}
	return nil
}

// Limit caps the bandwidth between nodes a and b at bitsPerSecond each
// way: an htb class on each node's side of its veth, which a u32 filter
// fills with the packets to the other node's address only, so that the
// clients' traffic (to and from the caller's namespace) and the traffic
// to other nodes keep the link's full speed. Unclassified packets leave
// through htb's direct queue, unshaped. Limiting a pair again changes its
// rate; Unshape removes every limit (Heal does not).
func (nw *Network) Limit(a, b int, bitsPerSecond int64) error {
	if err := nw.checkPair("limit", a, b); err != nil {
		return err
	}
	if bitsPerSecond < 8000 {
		return fmt.Errorf("netns: limit of %d bit/s: want at least 8000", bitsPerSecond)
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	rate := fmt.Sprintf("%dbit", bitsPerSecond)
	verb := "add"
	if _, ok := nw.limits[pairKey(a, b)]; ok {
		verb = "change"
	}
	for _, side := range [][2]int{{a, b}, {b, a}} {
		ns := nw.Node(side[0]).NS
		if !nw.htb[side[0]] {
			if err := run("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", inner, "root", "handle", "1:", "htb"); err != nil {
				return err
			}
			nw.htb[side[0]] = true
		}
		class := fmt.Sprintf("1:%x", side[1])
		if err := run("ip", "netns", "exec", ns, "tc", "class", verb, "dev", inner, "parent", "1:", "classid", class,
			"htb", "rate", rate, "ceil", rate); err != nil {
			return err
		}
		if verb == "add" {
			if err := run("ip", "netns", "exec", ns, "tc", "filter", "add", "dev", inner, "parent", "1:", "protocol", "ip",
				"prio", "1", "u32", "match", "ip", "dst", nw.Node(side[1]).IP+"/32", "flowid", class); err != nil {
				return err
			}
		}
	}
	nw.limits[pairKey(a, b)] = bitsPerSecond
	return nil
}

// Delay adds d of latency to each direction between nodes a and b (a
// round trip between them takes 2d longer), in the forwarders of a
// network made WithForwarders: each chunk of bytes is held for d from
// the moment it arrived, in a queue, so the delay does not cap the
// throughput. A d of 0 removes the pair's delay; Unshape removes every
// delay (Heal does not). The delay applies to bytes arriving from now
// on, on connections open and new.
func (nw *Network) Delay(a, b int, d time.Duration) error {
	if err := nw.checkPair("delay", a, b); err != nil {
		return err
	}
	if !nw.forwarding {
		return ErrNoForwarders
	}
	if d < 0 {
		return fmt.Errorf("netns: negative delay %v", d)
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if d == 0 {
		delete(nw.delays, pairKey(a, b))
	} else {
		nw.delays[pairKey(a, b)] = d
	}
	nw.signalShapeLocked()
	return nil
}

// Unshape removes every limit and every delay; cuts stay (Heal removes
// those).
func (nw *Network) Unshape() error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	var errs []error
	for node := range nw.htb {
		errs = append(errs, run("ip", "netns", "exec", nw.Node(node).NS, "tc", "qdisc", "del", "dev", inner, "root"))
	}
	clear(nw.htb)
	clear(nw.limits)
	clear(nw.delays)
	nw.signalShapeLocked()
	return errors.Join(errs...)
}

// Limits returns the limited pairs, lower node first, with their rates
// in bits per second.
func (nw *Network) Limits() map[[2]int]int64 {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	out := map[[2]int]int64{}
	for k, v := range nw.limits {
		out[k] = v
	}
	return out
}

// Delays returns the delayed pairs, lower node first, with each
// direction's delay.
func (nw *Network) Delays() map[[2]int]time.Duration {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	out := map[[2]int]time.Duration{}
	for k, v := range nw.delays {
		out[k] = v
	}
	return out
}

func (nw *Network) delayOf(key [2]int) time.Duration {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.delays[key]
}

// shapeChanged returns a channel closed at the next change of a delay.
func (nw *Network) shapeChanged() <-chan struct{} {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.changed
}

func (nw *Network) signalShapeLocked() {
	close(nw.changed)
	nw.changed = make(chan struct{})
}

// nodeAt returns the node whose address is ip, 0 when none.
func (nw *Network) nodeAt(ip string) int {
	for i, n := range nw.nodes {
		if n.IP == ip {
			return i + 1
		}
	}
	return 0
}
