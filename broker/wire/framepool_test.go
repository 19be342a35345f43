package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestFrameClasses(t *testing.T) {
	for _, tc := range []struct{ n, class int }{
		{1, 0}, {1024, 0}, {1025, 1}, {2048, 1}, {2049, 2},
		{1 << 20, 10}, {4 << 20, 12}, {4<<20 + 1, -1}, {100 << 20, -1},
	} {
		if got := frameClass(tc.n); got != tc.class {
			t.Errorf("frameClass(%d) = %d, want %d", tc.n, got, tc.class)
		}
	}
	for _, n := range []int{1, 1000, 5000, 1 << 20, 3 << 20, 4<<20 + 1} {
		p := getFrame(n)
		if len(*p) != n || cap(*p) < n {
			t.Fatalf("getFrame(%d): len %d cap %d", n, len(*p), cap(*p))
		}
		if c := frameClass(n); c >= 0 && cap(*p) != 1<<(c+minFrameClassShift) {
			t.Fatalf("getFrame(%d): cap %d is not its class size", n, cap(*p))
		}
		if c := frameClass(n); c < 0 && cap(*p) != n {
			t.Fatalf("getFrame(%d): unpooled frame cap %d, want exact", n, cap(*p))
		}
		(*p)[0] = 1
		b := *p
		releaseFrame(p)
		if frameClass(n) >= 0 && poisonFrames && b[0] != 0xdb {
			t.Fatalf("released frame of %d bytes not poisoned in a test binary", n)
		}
	}
	releaseFrame(nil)
}

// aliasDispatcher answers Produce with a body that writes the request's
// record bytes back, read from the frame itself (kmsg aliases Records to
// it) after Dispatch has returned, in the writer goroutine. If the frame
// were reused before its response was written, the echo would come back
// poisoned or overwritten by a later request.
type aliasDispatcher struct{}

type echoBody struct{ b []byte }

func (e *echoBody) Len() int { return len(e.b) }
func (e *echoBody) WriteTo(w io.Writer) (int64, error) {
	time.Sleep(200 * time.Microsecond) // let the reader run ahead
	n, err := w.Write(e.b)
	return int64(n), err
}
func (e *echoBody) Release() {}

func (aliasDispatcher) Dispatch(ctx context.Context, req *Request) (Response, error) {
	if req.Header.Key != produceKey {
		return Response{}, fmt.Errorf("only produce")
	}
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(req.Header.Version)
	if err := p.ReadFrom(req.Body); err != nil {
		return Response{}, err
	}
	return Response{Body: &echoBody{b: p.Topics[0].Partitions[0].Records}}, nil
}

func produceFrame(corr int32, records []byte) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(7)
	req.Acks = 1
	req.TimeoutMillis = 1000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "t"
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = records
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	return frameOf(encodeRequest(req, corr, nil))
}

func TestPooledProduceFrameLivesUntilResponseWritten(t *testing.T) {
	_, addr := startServer(t, aliasDispatcher{}, 8<<20)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second)) // liveness only: slow under -race on a loaded machine
	rng := rand.New(rand.NewPCG(7, 8))
	const n = 60
	want := make([][]byte, n)
	go func() {
		for i := range n {
			// Sizes across several classes, some repeated so that
			// buffers are reused.
			size := []int{100, 900, 3000, 70 << 10, 300 << 10, 5 << 20}[rng.IntN(6)]
			recs := make([]byte, size)
			for j := range recs {
				recs[j] = byte(rng.Uint32())
			}
			want[i] = recs
			if _, err := c.Write(produceFrame(int32(i), recs)); err != nil {
				return
			}
		}
	}()
	for i := range n {
		frame, err := ReadFrame(c, 16<<20)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if corr := int32(binary.BigEndian.Uint32(frame)); corr != int32(i) {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
		if !bytes.Equal(frame[4:], want[i]) {
			t.Fatalf("response %d: echoed records differ from the request's (%d bytes)", i, len(want[i]))
		}
	}
}

// loopConn is a net.Conn whose reads replay one byte stream forever, to
// measure the server's request reading without a socket.
type loopConn struct {
	net.Conn
	data []byte
	off  int
}

func (l *loopConn) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}

// BenchmarkReadRequest reads Produce requests of workload B's shape (16 KiB
// of records) and workload A's (1 MiB) and gives each frame back, as the
// connection loop does once the response is written.
func BenchmarkReadRequest(b *testing.B) {
	defer func(p bool) { poisonFrames = p }(poisonFrames)
	poisonFrames = false // measure what production does
	for _, size := range []int{16 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("produce-%dKiB", size>>10), func(b *testing.B) {
			fr := produceFrame(1, make([]byte, size))
			s := &Server{}
			s.init()
			ic := &idleConn{Conn: &loopConn{data: fr}, act: &activity{}}
			cn := &conn{s: s, r: bufio.NewReaderSize(ic, 4<<10), ic: ic, act: ic.act, max: DefaultMaxRequestBytes, ctx: context.Background()}
			b.SetBytes(int64(len(fr)))
			b.ReportAllocs()
			for b.Loop() {
				p, err := cn.readRequest()
				if err != nil || len(p.frame) != len(fr)-4 {
					b.Fatal(err)
				}
				p.drop()
			}
		})
	}
}
