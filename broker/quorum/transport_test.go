package quorum

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// recorder is a Peer that records what a transport hands it.
type recorder struct {
	mu          sync.Mutex
	steps       []*pb.Message
	unreachable map[uint64]int
	snapshots   map[uint64][]bool
	stepped     chan struct{}
}

func newRecorder() *recorder {
	return &recorder{unreachable: map[uint64]int{}, snapshots: map[uint64][]bool{}, stepped: make(chan struct{}, 100)}
}

func (r *recorder) Step(ctx context.Context, m *pb.Message) error {
	r.mu.Lock()
	r.steps = append(r.steps, m)
	r.mu.Unlock()
	r.stepped <- struct{}{}
	return nil
}

func (r *recorder) ReportUnreachable(id uint64) {
	r.mu.Lock()
	r.unreachable[id]++
	r.mu.Unlock()
}

func (r *recorder) ReportSnapshot(id uint64, ok bool) {
	r.mu.Lock()
	r.snapshots[id] = append(r.snapshots[id], ok)
	r.mu.Unlock()
}

func testTransport(t *testing.T, id uint64, voters map[uint64]string, maxFrame int) (*TCPTransport, *recorder) {
	t.Helper()
	tr, err := NewTCPTransport(TransportConfig{
		NodeID: id, Voters: voters, ClusterID: "c1", MaxFrameBytes: maxFrame, QueueLen: 4,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := newRecorder()
	tr.Attach(r)
	t.Cleanup(func() { tr.Close() })
	return tr, r
}

func heartbeat(from, to uint64) *pb.Message {
	return &pb.Message{Type: pb.MsgHeartbeat.Enum(), From: new(from), To: new(to), Term: new(uint64(3))}
}

func frameOf(t *testing.T, clusterID string, m *pb.Message) []byte {
	t.Helper()
	b, err := appendFrame(nil, clusterID, 1, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serveRaw runs ServeConn on one end of a pipe and returns the other end
// and ServeConn's result.
func serveRaw(tr *TCPTransport) (net.Conn, <-chan error) {
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- tr.ServeConn(b) }()
	return a, done
}

func wantClosed(t *testing.T, done <-chan error, want error) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, want) {
			t.Fatalf("connection closed with %v, want %v", err, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("connection not closed")
	}
}

func TestServeConnAcceptsAndRefuses(t *testing.T) {
	voters := map[uint64]string{1: "127.0.0.1:1", 2: "127.0.0.1:2"}
	tr, rec := testTransport(t, 1, voters, 0)

	conn, done := serveRaw(tr)
	go conn.Write(frameOf(t, "c1", heartbeat(2, 1)))
	select {
	case <-rec.stepped:
	case <-time.After(5 * time.Second):
		t.Fatal("good frame not stepped")
	}
	if m := rec.steps[0]; m.GetType() != pb.MsgHeartbeat || m.GetFrom() != 2 || m.GetTerm() != 3 {
		t.Fatalf("stepped %v", m)
	}
	conn.Close()
	<-done

	big := make([]byte, 4)
	binary.BigEndian.PutUint32(big, 1<<30)
	wrongKey := frameOf(t, "c1", heartbeat(2, 1))
	binary.BigEndian.PutUint16(wrongKey[4:], 18) // ApiVersions
	for name, tc := range map[string]struct {
		frame []byte
		want  error
	}{
		"oversized":      {big, ErrFrame},
		"foreign":        {frameOf(t, "c2", heartbeat(2, 1)), ErrFrame},
		"non-voter":      {frameOf(t, "c1", heartbeat(9, 1)), ErrFrame},
		"other target":   {frameOf(t, "c1", heartbeat(2, 2)), ErrFrame},
		"wrong api key":  {wrongKey, ErrFrame},
		"garbage body":   {append(frameOf(t, "c1", &pb.Message{})[:4+10+len(ClientID)+4], 0xff, 0xff, 0xff), ErrFrame},
		"negative size":  {[]byte{0x80, 0, 0, 0}, ErrFrame},
		"torn mid-frame": {frameOf(t, "c1", heartbeat(2, 1))[:12], io.ErrUnexpectedEOF},
	} {
		t.Run(name, func(t *testing.T) {
			if name == "garbage body" {
				// Fix the size to the truncated body.
				binary.BigEndian.PutUint32(tc.frame, uint32(len(tc.frame)-4))
			}
			conn, done := serveRaw(tr)
			go func() {
				conn.Write(tc.frame)
				if tc.want == io.ErrUnexpectedEOF {
					conn.Close()
				}
			}()
			wantClosed(t, done, tc.want)
			conn.Close()
		})
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.steps) != 1 {
		t.Fatalf("%d messages stepped, want only the good one", len(rec.steps))
	}
}

func TestTransportRefusesSmallFrameBound(t *testing.T) {
	_, err := NewTCPTransport(TransportConfig{NodeID: 1, Voters: map[uint64]string{1: "a"}, ClusterID: "c", MaxFrameBytes: MaxEntryBytes})
	if err == nil {
		t.Fatal("accepted a frame bound no larger than an entry")
	}
}

func TestReadFrameAllocatesWhatArrives(t *testing.T) {
	// A size at the bound with few bytes behind it costs those bytes only.
	hdr := make([]byte, 4)
	binary.BigEndian.PutUint32(hdr, 8<<20)
	r := io.MultiReader(bytes.NewReader(hdr), bytes.NewReader(make([]byte, 100)))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadFrame(r, 8<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short frame: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("reading 100 bytes of an 8 MiB frame allocated %d bytes", grew)
	}
}

func TestSendDropsWhenQueueFull(t *testing.T) {
	// Peer 2's address refuses connections: the queue fills, Send never
	// blocks, and every drop is reported.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	tr, rec := testTransport(t, 1, map[uint64]string{1: "127.0.0.1:1", 2: addr}, 0)
	done := make(chan struct{})
	go func() {
		for range 100 {
			tr.Send([]*pb.Message{heartbeat(1, 2), {Type: pb.MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(2))}})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Send blocked on an unreachable peer")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec.mu.Lock()
		n, snaps := rec.unreachable[2], len(rec.snapshots[2])
		failed := true
		for _, ok := range rec.snapshots[2] {
			failed = failed && !ok
		}
		rec.mu.Unlock()
		if n == 200 && snaps == 100 {
			if !failed {
				t.Fatal("a snapshot to an unreachable peer was reported delivered")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d unreachable reports and %d snapshot reports for 200 undeliverable messages", n, snaps)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTransportDelivers(t *testing.T) {
	ln1, _ := net.Listen("tcp", "127.0.0.1:0")
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	voters := map[uint64]string{1: ln1.Addr().String(), 2: ln2.Addr().String()}
	tr1, _ := testTransport(t, 1, voters, 0)
	tr2, rec2 := testTransport(t, 2, voters, 0)
	go tr1.Serve(ln1)
	go tr2.Serve(ln2)
	snap := &pb.Message{Type: pb.MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(1)),
		Snapshot: &pb.Snapshot{Data: bytes.Repeat([]byte("s"), 100<<10), Metadata: pb.EnsureSnapshotMetadata(nil)}}
	tr1.Send([]*pb.Message{heartbeat(1, 2), snap})
	for range 2 {
		select {
		case <-rec2.stepped:
		case <-time.After(10 * time.Second):
			t.Fatal("messages not delivered")
		}
	}
	rec2.mu.Lock()
	got := rec2.steps[1]
	rec2.mu.Unlock()
	if got.GetType() != pb.MsgSnap || len(got.GetSnapshot().GetData()) != 100<<10 {
		t.Fatalf("received %v with %d snapshot bytes", got.GetType(), len(got.GetSnapshot().GetData()))
	}
}

// FuzzParseFrame holds the frame decoder to never panicking and to
// accepting only frames of this cluster with the raft api key.
func FuzzParseFrame(f *testing.F) {
	good, _ := appendFrame(nil, "c1", 7, heartbeat(2, 1))
	f.Add(good[4:])
	f.Add(good[4:12])
	foreign, _ := appendFrame(nil, "c2", 7, heartbeat(2, 1))
	f.Add(foreign[4:])
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, err := parseFrame(frame, "c1")
		if err != nil {
			if !errors.Is(err, ErrFrame) {
				t.Fatalf("error %v is not ErrFrame", err)
			}
			return
		}
		if m == nil {
			t.Fatal("nil message without error")
		}
		if key, _ := FrameAPIKey(frame); key != APIKey {
			t.Fatalf("accepted api key %d", key)
		}
	})
}
