package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// ObserverFetchAPIKey is the private request api key of an observer fetch:
// a node that is not a voter (process.roles=broker) asks a voter for the
// committed entries of the metadata log from an index on, as a Kafka
// observer fetches __cluster_metadata from the quorum. It sits beside
// APIKey, far above Kafka's api keys, so the controller listener routes it
// by the request header's api key; unlike a raft frame it is answered.
// It is not advertised in ApiVersions.
const ObserverFetchAPIKey int16 = 32701

// ObserverFetchVersion is the only version of the observer fetch.
const ObserverFetchVersion int16 = 0

// ObserverClientID is the client id of an observer fetch's request header.
const ObserverClientID = "cascade-observer"

// MaxObserverWait bounds how long a voter holds an observer fetch that has
// nothing new: a longer wait asked for is cut to it.
const MaxObserverWait = 10 * time.Second

// An observer fetch is a Kafka request: int32 size, request header v1
// (int16 api key ObserverFetchAPIKey, int16 version 0, int32 correlation
// id, nullable string client id), then the body:
//
//	int16-length cluster id
//	int32 observer node id
//	int64 next index (the first index the observer lacks; 1 on an empty log)
//	int32 max bytes (entries beyond the first stop at this many bytes)
//	int32 max wait ms (how long to hold the request while nothing is new)
//
// The answer is a Kafka response: int32 size, int32 correlation id, then:
//
//	int64 leader id (0: the voter knows none), int64 term
//	int64 commit index (what the voter has applied; everything served is
//	      at or below it)
//	int64 next index (where the observer fetches next)
//	int8  kind: 0 entries, 1 snapshot
//	kind 1: int64 index, int64 term, int32 length, data (the latest
//	        snapshot, sent when the next index is below the log start)
//	then int32 count, and per entry: int64 index, int64 term, int32
//	        length, data (committed entries with data, in index order;
//	        entries without data are skipped, next says how far)
//
// A request of another cluster, or that does not decode, closes the
// connection.

// ObserverFetchRequest is one observer fetch.
type ObserverFetchRequest struct {
	ClusterID string
	NodeID    int32
	Next      uint64
	MaxBytes  int32
	MaxWait   time.Duration
}

// ObserverFetchResponse is a voter's answer to an observer fetch.
type ObserverFetchResponse struct {
	Leader, Term uint64
	Commit       uint64
	Next         uint64
	// Snapshot, when not nil, replaces the observer's state before
	// Entries apply.
	Snapshot *Snapshot
	Entries  []Entry
}

// ErrObserverFrame reports an observer fetch or answer that does not
// decode, or is of another cluster.
var ErrObserverFrame = errors.New("quorum: bad observer fetch frame")

// AppendObserverFetch appends the request frame of r to b.
func AppendObserverFetch(b []byte, corr int32, r ObserverFetchRequest) []byte {
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(ObserverFetchAPIKey))
	b = binary.BigEndian.AppendUint16(b, uint16(ObserverFetchVersion))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(ObserverClientID)))
	b = append(b, ObserverClientID...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.ClusterID)))
	b = append(b, r.ClusterID...)
	b = binary.BigEndian.AppendUint32(b, uint32(r.NodeID))
	b = binary.BigEndian.AppendUint64(b, r.Next)
	b = binary.BigEndian.AppendUint32(b, uint32(r.MaxBytes))
	b = binary.BigEndian.AppendUint32(b, uint32(r.MaxWait.Milliseconds()))
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// reader decodes big-endian fields, remembering the first short read.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n < 0 || n > len(r.b) {
		r.bad = true
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// ParseObserverFetch decodes a request frame as ReadFrame returns it and
// returns its correlation id.
func ParseObserverFetch(frame []byte) (corr int32, req ObserverFetchRequest, err error) {
	r := &reader{b: frame}
	key, ver := int16(r.u16()), int16(r.u16())
	corr = int32(r.u32())
	if r.bad || key != ObserverFetchAPIKey || ver != ObserverFetchVersion {
		return 0, req, fmt.Errorf("%w: api key %d version %d", ErrObserverFrame, key, ver)
	}
	if cl := int16(r.u16()); cl > 0 {
		r.take(int(cl))
	} else if cl < -1 {
		return 0, req, fmt.Errorf("%w: client id length %d", ErrObserverFrame, cl)
	}
	idl := int(r.u16())
	if idl > maxClusterIDLen {
		return 0, req, fmt.Errorf("%w: cluster id of %d bytes", ErrObserverFrame, idl)
	}
	req.ClusterID = string(r.take(idl))
	req.NodeID = int32(r.u32())
	req.Next = r.u64()
	req.MaxBytes = int32(r.u32())
	wait := int32(r.u32())
	if r.bad || len(r.b) != 0 {
		return 0, req, fmt.Errorf("%w: body of %d bytes", ErrObserverFrame, len(frame))
	}
	if wait < 0 || req.MaxBytes < 0 || req.NodeID < 0 {
		return 0, req, fmt.Errorf("%w: node %d, max bytes %d, max wait %d ms", ErrObserverFrame, req.NodeID, req.MaxBytes, wait)
	}
	req.MaxWait = time.Duration(wait) * time.Millisecond
	return corr, req, nil
}

// appendObserverAnswer appends the response frame of r to b.
func appendObserverAnswer(b []byte, corr int32, r ObserverFetchResponse) []byte {
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint64(b, r.Leader)
	b = binary.BigEndian.AppendUint64(b, r.Term)
	b = binary.BigEndian.AppendUint64(b, r.Commit)
	b = binary.BigEndian.AppendUint64(b, r.Next)
	if s := r.Snapshot; s != nil {
		b = append(b, 1)
		b = binary.BigEndian.AppendUint64(b, s.Index)
		b = binary.BigEndian.AppendUint64(b, s.Term)
		b = binary.BigEndian.AppendUint32(b, uint32(len(s.Data)))
		b = append(b, s.Data...)
	} else {
		b = append(b, 0)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Entries)))
	for _, e := range r.Entries {
		b = binary.BigEndian.AppendUint64(b, e.Index)
		b = binary.BigEndian.AppendUint64(b, e.Term)
		b = binary.BigEndian.AppendUint32(b, uint32(len(e.Data)))
		b = append(b, e.Data...)
	}
	binary.BigEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

// parseObserverAnswer decodes a response frame (as ReadFrame returns it)
// and returns its correlation id. Entries must follow one another above
// the snapshot and below the next index: anything else is a voter that
// answers what it must not.
func parseObserverAnswer(frame []byte) (corr int32, resp ObserverFetchResponse, err error) {
	r := &reader{b: frame}
	corr = int32(r.u32())
	resp.Leader, resp.Term, resp.Commit, resp.Next = r.u64(), r.u64(), r.u64(), r.u64()
	kind := r.take(1)
	if r.bad || kind[0] > 1 {
		return 0, resp, fmt.Errorf("%w: answer header", ErrObserverFrame)
	}
	if kind[0] == 1 {
		s := &Snapshot{Index: r.u64(), Term: r.u64()}
		s.Data = r.take(int(r.u32()))
		resp.Snapshot = s
	}
	count := r.u32()
	if r.bad || uint64(count) > uint64(len(r.b))/20 {
		return 0, resp, fmt.Errorf("%w: %d entries in %d bytes", ErrObserverFrame, count, len(r.b))
	}
	last := uint64(0)
	if resp.Snapshot != nil {
		last = resp.Snapshot.Index
	}
	for range count {
		e := Entry{Index: r.u64(), Term: r.u64()}
		e.Data = r.take(int(r.u32()))
		if r.bad || e.Index <= last {
			return 0, resp, fmt.Errorf("%w: entry %d after %d", ErrObserverFrame, e.Index, last)
		}
		last = e.Index
		resp.Entries = append(resp.Entries, e)
	}
	if r.bad || len(r.b) != 0 || resp.Next <= last || resp.Next == 0 {
		return 0, resp, fmt.Errorf("%w: next index %d after entry %d, %d bytes left", ErrObserverFrame, resp.Next, last, len(r.b))
	}
	return corr, resp, nil
}
