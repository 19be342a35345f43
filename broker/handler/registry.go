package handler

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request is one decoded request as a handler sees it.
type Request struct {
	Key      int16
	Version  int16
	ClientID string
	// Conn identifies the connection (remote address), for logs and quotas.
	Conn string
	Msg  kmsg.Request
	// Principal and Host are who sent the request (wire.Request's
	// Principal and ClientHost), as ACLs match them.
	Principal string
	Host      string

	// consumed gives the request's memory reservation back while its
	// answer waits (wire.Request.Consumed); nil when not served by the
	// wire server.
	consumed func()
}

// Func answers one request. Kafka errors travel as codes inside the response;
// a returned Go error means "close this connection" (as kfake does).
// A nil response with a nil error means "send nothing" (Produce with acks=0).
type Func func(ctx context.Context, env *Env, req *Request) (kmsg.Response, error)

// API is one registered API key and the version range Cascade implements.
type API struct {
	Key      int16
	Min, Max int16
	Fn       Func
}

var (
	regMu sync.Mutex
	reg   = map[int16]API{}
)

// register is called from each handler file's init with the versions that
// file implements; ApiVersions is built from this registry, so what is
// advertised is exactly what exists.
func register(key, min, max int16, fn Func) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := reg[key]; dup {
		panic(fmt.Sprintf("handler: api key %d registered twice", key))
	}
	reg[key] = API{Key: key, Min: min, Max: max, Fn: fn}
}

// Lookup returns the handler for key, and whether version is within its range.
func Lookup(key, version int16) (API, bool) {
	regMu.Lock()
	defer regMu.Unlock()
	a, ok := reg[key]
	if !ok || version < a.Min || version > a.Max {
		return a, false
	}
	return a, true
}

// APIs returns every registered API in key order.
func APIs() []API {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]API, 0, len(reg))
	for _, a := range reg {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
