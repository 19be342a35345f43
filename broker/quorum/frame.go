package quorum

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// APIKey is the private request api key of a raft message frame. Kafka's
// api keys are small (0-92 in Kafka 4.x); 32700 sits far above them and
// below int16's limit, so a controller listener can serve raft traffic and
// Kafka's broker-to-controller requests on one port, telling them apart by
// the api key of the request header. It is not advertised in ApiVersions.
const APIKey int16 = 32700

// APIVersion is the only version of the raft message frame.
const APIVersion int16 = 0

// ClientID is the client id of the request header of a raft frame.
const ClientID = "cascade-raft"

// DefaultMaxFrameBytes bounds a raft frame (a snapshot message carries the
// whole snapshot). A larger announced size closes the connection before
// anything is allocated for it.
const DefaultMaxFrameBytes = 32 << 20

// minFrameBytes is the smallest frame bound a transport accepts: one
// entry of MaxEntryBytes plus a default append's worth (MaxSizePerMsg) and
// headers.
const minFrameBytes = MaxEntryBytes + 2<<20

// maxClusterIDLen bounds the cluster id a frame carries.
const maxClusterIDLen = 255

// ErrFrame reports a raft frame that is malformed, too large, of another
// cluster, or from a node that is not a voter; the connection is closed.
var ErrFrame = errors.New("quorum: bad raft frame")

// A raft frame is a Kafka request: int32 size, then a request header v1
// (int16 api key, int16 api version, int32 correlation id, nullable string
// client id), then the body: int16-length cluster id, then the marshalled
// raftpb.Message to the end of the frame. Frames are one-way: raft
// messages are their own responses, so none is written back.

// appendFrame appends the frame of m to b.
func appendFrame(b []byte, clusterID string, corr int32, m *pb.Message) ([]byte, error) {
	body, err := proto.Marshal(m)
	if err != nil {
		return b, fmt.Errorf("quorum: marshal message: %w", err)
	}
	size := 2 + 2 + 4 + 2 + len(ClientID) + 2 + len(clusterID) + len(body)
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	b = binary.BigEndian.AppendUint16(b, uint16(APIKey))
	b = binary.BigEndian.AppendUint16(b, uint16(APIVersion))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len(ClientID)))
	b = append(b, ClientID...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(clusterID)))
	b = append(b, clusterID...)
	return append(b, body...), nil
}

// ReadFrame reads one size-prefixed frame from r and returns it without
// its size. A size below a request header or above maxBytes is ErrFrame
// before anything is read for it; the buffer grows with the bytes that
// actually arrive, so a peer announcing maxBytes and sending nothing
// costs nothing.
func ReadFrame(r io.Reader, maxBytes int) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int64(int32(binary.BigEndian.Uint32(sz[:])))
	if n < 10 || n > int64(maxBytes) {
		return nil, fmt.Errorf("%w: size %d outside [10, %d]", ErrFrame, n, maxBytes)
	}
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, n); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf.Bytes(), nil
}

// FrameAPIKey returns the api key of a frame read by ReadFrame, so that a
// listener shared with Kafka requests can route it.
func FrameAPIKey(frame []byte) (int16, bool) {
	if len(frame) < 2 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(frame)), true
}

// parseFrame decodes a frame read by ReadFrame into the message it carries
// and checks its cluster id.
func parseFrame(frame []byte, clusterID string) (*pb.Message, error) {
	if len(frame) < 10 {
		return nil, fmt.Errorf("%w: %d bytes is shorter than a request header", ErrFrame, len(frame))
	}
	key := int16(binary.BigEndian.Uint16(frame[0:2]))
	ver := int16(binary.BigEndian.Uint16(frame[2:4]))
	if key != APIKey {
		return nil, fmt.Errorf("%w: api key %d", ErrFrame, key)
	}
	if ver != APIVersion {
		return nil, fmt.Errorf("%w: api version %d", ErrFrame, ver)
	}
	rest := frame[8:]
	cl := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if cl > 0 {
		if int(cl) > len(rest) {
			return nil, fmt.Errorf("%w: client id of %d bytes in %d", ErrFrame, cl, len(rest))
		}
		rest = rest[cl:]
	} else if cl < -1 {
		return nil, fmt.Errorf("%w: client id length %d", ErrFrame, cl)
	}
	if len(rest) < 2 {
		return nil, fmt.Errorf("%w: no cluster id", ErrFrame)
	}
	idl := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if idl > maxClusterIDLen || idl > len(rest) {
		return nil, fmt.Errorf("%w: cluster id of %d bytes in %d", ErrFrame, idl, len(rest))
	}
	if got := string(rest[:idl]); got != clusterID {
		return nil, fmt.Errorf("%w: cluster id %q, this cluster is %q: the sender belongs to another cluster, or the two nodes' cluster.id or controller.quorum.voters differ", ErrFrame, got, clusterID)
	}
	m := &pb.Message{}
	if err := proto.Unmarshal(rest[idl:], m); err != nil {
		return nil, fmt.Errorf("%w: message: %v", ErrFrame, err)
	}
	return m, nil
}
