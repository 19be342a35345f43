package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawClientID is the raw client's client.id in every request header.
const rawClientID = "cascade-bench-raw"

// rawMaxPending bounds the requests one raw connection has in flight; the
// producer's in-flight limit (5) and the consumer's fetch groups stay
// below it.
const rawMaxPending = 64

// rawMaxFrame bounds a response the raw client reads: a fetch response is
// at most fetch.max.bytes (50 MiB) plus its framing.
const rawMaxFrame = 64 << 20

var errRawConnClosed = errors.New("raw connection closed")

// rawConn is one TCP connection of the raw client to one broker. Requests
// are written in order and may be pipelined; one goroutine reads the
// responses, which a Kafka broker sends in request order, and calls the
// callback each request registered, in that goroutine, with the frame in a
// buffer reused for the next response (a callback must not keep it).
type rawConn struct {
	c        net.Conn
	mu       sync.Mutex // orders each write with its pending entry
	corr     int32
	scratch  []byte
	pending  chan rawPending
	fmtr     *kmsg.RequestFormatter
	versions map[int16]int16
	readErr  firstError
	done     chan struct{}
	closing  sync.Once
}

type rawPending struct {
	corr int32
	fn   func(body []byte, err error)
}

// dialRaw connects to addr, negotiates API versions and starts the reader.
// The connection closes when ctx ends or on close.
func dialRaw(ctx context.Context, addr string) (*rawConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("raw client: %w", err)
	}
	rc := &rawConn{c: c, pending: make(chan rawPending, rawMaxPending), done: make(chan struct{}),
		fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID(rawClientID))}
	go rc.readLoop()
	go func() {
		select {
		case <-ctx.Done():
			rc.close()
		case <-rc.done:
		}
	}()
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version, av.ClientSoftwareName, av.ClientSoftwareVersion = 3, rawClientID, "1"
	avr := kmsg.NewPtrApiVersionsResponse()
	if err := rc.call(av, avr); err != nil {
		rc.close()
		return nil, fmt.Errorf("raw client: ApiVersions to %s: %w", addr, err)
	}
	if err := kerr.ErrorForCode(avr.ErrorCode); err != nil {
		rc.close()
		return nil, fmt.Errorf("raw client: ApiVersions to %s: %w", addr, err)
	}
	rc.versions = map[int16]int16{}
	for _, k := range avr.ApiKeys {
		rc.versions[k.ApiKey] = k.MaxVersion
	}
	return rc, nil
}

// version returns the highest version of key both the broker and the raw
// client speak, at most ours and at least least.
func (rc *rawConn) version(key, least, ours int16) (int16, error) {
	v, ok := rc.versions[key]
	if !ok || v < least {
		return 0, fmt.Errorf("raw client: the broker lacks %s v%d", kmsg.NameForKey(key), least)
	}
	return min(v, ours), nil
}

// close closes the connection; it never waits for a writer, so a write
// stuck on a broker that stopped reading is ended by it.
func (rc *rawConn) close() {
	rc.closing.Do(func() {
		close(rc.done)
		rc.c.Close()
	})
}

func (rc *rawConn) readLoop() {
	r := bufio.NewReaderSize(rc.c, 64<<10)
	var buf []byte
	var err error
	for err == nil {
		var size [4]byte
		if _, err = io.ReadFull(r, size[:]); err != nil {
			break
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if n < 4 || n > rawMaxFrame {
			err = fmt.Errorf("raw client: response frame of %d bytes", n)
			break
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err = io.ReadFull(r, buf); err != nil {
			break
		}
		var p rawPending
		select {
		case p = <-rc.pending:
		default:
			err = errors.New("raw client: a response no request asked for")
			continue
		}
		if got := int32(binary.BigEndian.Uint32(buf)); got != p.corr {
			err = fmt.Errorf("raw client: response correlation id %d, want %d", got, p.corr)
			p.fn(nil, err)
			continue
		}
		p.fn(buf[4:], nil)
	}
	select {
	case <-rc.done:
		err = errors.Join(errRawConnClosed, err)
	default:
	}
	rc.readErr.set(err)
	err = rc.readErr.get() // a failed write's error, if one came first
	rc.close()
	// Fail what is still pending; new sends see the closed connection.
	// Callbacks given an error never send, so holding mu here is safe.
	rc.mu.Lock()
	for {
		select {
		case p := <-rc.pending:
			p.fn(nil, err)
			continue
		default:
		}
		break
	}
	rc.mu.Unlock()
}

// sendLocked writes a frame whose correlation id field (bytes 8 to 12 of
// bufs[0]) it fills in, and registers fn for its response; fn nil means the
// request has none (Produce with acks=0). An error returned means fn will
// not be called; once registered, fn is called exactly once, with the
// response or with the error that ended the connection.
func (rc *rawConn) sendLocked(bufs net.Buffers, fn func([]byte, error)) error {
	select {
	case <-rc.done:
		return errors.Join(errRawConnClosed, rc.readErr.get())
	default:
	}
	rc.corr++
	binary.BigEndian.PutUint32(bufs[0][8:], uint32(rc.corr))
	if fn != nil {
		select {
		case rc.pending <- rawPending{corr: rc.corr, fn: fn}:
		default:
			return errors.New("raw client: too many requests in flight")
		}
	}
	if _, err := bufs.WriteTo(rc.c); err != nil {
		err = fmt.Errorf("raw client: writing a request: %w", err)
		rc.readErr.set(err)
		rc.close()
		if fn == nil {
			return err
		}
		// The reader fails every pending request, this one included, so
		// the error reaches fn once, as any response would.
	}
	return nil
}

// send writes a request encoded by kmsg and registers fn for its response.
func (rc *rawConn) send(req kmsg.Request, fn func([]byte, error)) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.scratch = rc.fmtr.AppendRequest(rc.scratch[:0], req, 0)
	return rc.sendLocked(net.Buffers{rc.scratch}, fn)
}

// call sends req and decodes its response into resp.
func (rc *rawConn) call(req kmsg.Request, resp kmsg.Response) error {
	resp.SetVersion(req.GetVersion())
	got := make(chan error, 1)
	err := rc.send(req, func(body []byte, err error) {
		if err == nil {
			err = decodeResponse(resp, body)
		}
		got <- err
	})
	if err != nil {
		return err
	}
	return <-got
}

// decodeResponse decodes a response body after its correlation id: the
// tags of a flexible response header (ApiVersions' header is always v0),
// then the message.
func decodeResponse(resp kmsg.Response, body []byte) error {
	if resp.IsFlexible() && resp.Key() != 18 {
		r := &kbin.Reader{Src: body}
		kmsg.SkipTags(r)
		if !r.Ok() {
			return fmt.Errorf("raw client: truncated %s response header", kmsg.NameForKey(resp.Key()))
		}
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return fmt.Errorf("raw client: decoding %s v%d: %w", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
	return nil
}

// rawLayout is a topic's partition leaders and their brokers' addresses.
type rawLayout struct {
	leaders map[int32]int32
	addrs   map[int32]string
}

// layout asks rc for topic's metadata.
func (rc *rawConn) layout(topic string) (rawLayout, error) {
	v, err := rc.version(3, 1, 12)
	if err != nil {
		return rawLayout{}, err
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Version = v
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp := kmsg.NewPtrMetadataResponse()
	if err := rc.call(req, resp); err != nil {
		return rawLayout{}, err
	}
	l := rawLayout{leaders: map[int32]int32{}, addrs: map[int32]string{}}
	for _, b := range resp.Brokers {
		l.addrs[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	for _, mt := range resp.Topics {
		if err := kerr.ErrorForCode(mt.ErrorCode); err != nil {
			return l, fmt.Errorf("raw client: metadata of %s: %w", topic, err)
		}
		for _, p := range mt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return l, fmt.Errorf("raw client: metadata of %s-%d: %w", topic, p.Partition, err)
			}
			if _, ok := l.addrs[p.Leader]; !ok {
				return l, fmt.Errorf("raw client: %s-%d has leader %d, not a listed broker", topic, p.Partition, p.Leader)
			}
			l.leaders[p.Partition] = p.Leader
		}
	}
	return l, nil
}

// rawConns opens one connection per broker, on demand, and closes them
// all at the end.
type rawConns struct {
	ctx   context.Context
	addrs map[int32]string
	conns map[int32]*rawConn
}

func (cs *rawConns) get(node int32) (*rawConn, error) {
	if c, ok := cs.conns[node]; ok {
		return c, nil
	}
	c, err := dialRaw(cs.ctx, cs.addrs[node])
	if err != nil {
		return nil, err
	}
	cs.conns[node] = c
	return c, nil
}

func (cs *rawConns) close() {
	for _, c := range cs.conns {
		c.close()
	}
}

// openRaw connects to a seed broker and reads the topic's layout.
func openRaw(ctx context.Context, seeds string, topic string) (*rawConn, rawLayout, error) {
	var errs []error
	for _, addr := range strings.Split(seeds, ",") {
		c, err := dialRaw(ctx, addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l, err := c.layout(topic)
		if err != nil {
			c.close()
			return nil, l, err
		}
		return c, l, nil
	}
	return nil, rawLayout{}, errors.Join(errs...)
}
