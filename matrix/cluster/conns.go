package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RequestTimeout bounds one request to one node; a paused node never
// answers.
const RequestTimeout = 2 * time.Second

// Conns holds one franz-go client per listener address, each used only
// through its seed broker, so that every request goes to the listener it
// names and a dead or paused node is never waited on past RequestTimeout.
// The zero value is ready to use.
type Conns struct {
	mu sync.Mutex
	m  map[string]*kgo.Client
}

func (c *Conns) client(addr string) (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.m[addr]; ok {
		return cl, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.DialTimeout(time.Second))
	if err != nil {
		return nil, fmt.Errorf("cluster: client for %s: %w", addr, err)
	}
	if c.m == nil {
		c.m = map[string]*kgo.Client{}
	}
	c.m[addr] = cl
	return cl, nil
}

// Send sends req to the listener at addr and returns its response.
func (c *Conns) Send(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	cl, err := c.client(addr)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	resp, err := cl.SeedBrokers()[0].Request(rctx, req)
	if err != nil && rctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
		// The node closed a connection the client had kept (it restarted,
		// or reaped the connection as idle): one more try on a new one.
		resp, err = cl.SeedBrokers()[0].Request(rctx, req)
	}
	return resp, err
}

// Drop closes the clients of the given addresses, whose connections a kill
// or restart has ended.
func (c *Conns) Drop(addrs ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range addrs {
		if cl, ok := c.m[a]; ok {
			cl.Close()
			delete(c.m, a)
		}
	}
}

// Close closes every client.
func (c *Conns) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.m {
		cl.Close()
	}
	c.m = nil
}
