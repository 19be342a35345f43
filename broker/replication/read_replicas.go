package replication

import (
	"slices"
	"time"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/replica"
)

// ReadReplica is one replica a consumer may be sent to read from (KIP-392),
// as Kafka's ReplicaView without the endpoint: its log end offset and how
// long ago it last caught up with the leader (0 for the leader).
type ReadReplica struct {
	ID            int32
	LogEndOffset  int64
	SinceCaughtUp time.Duration
}

// ReadReplicas returns, when this node leads tp, the leader and the
// followers a consumer fetching at fetchOffset may read from, as Kafka's
// ReplicaManager.findPreferredReadReplica gathers them: only followers in
// the committed ISR whose log holds fetchOffset (log start <= fetchOffset <=
// log end), since a lagging follower would leave the consumer behind. ok
// is false when tp is not replicated here or this node does not lead it.
func (m *Manager) ReadReplicas(tp log.TopicPartition, fetchOffset int64) (leader ReadReplica, followers []ReadReplica, ok bool) {
	s := m.state(tp)
	if s == nil {
		return ReadReplica{}, nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone || s.st.Role() != replica.RoleLeader {
		return ReadReplica{}, nil, false
	}
	nowMs := m.now().UnixMilli()
	self := s.st.Leader()
	leader = ReadReplica{ID: self, LogEndOffset: s.p.LogEndOffset()}
	isr := s.st.ISR()
	for _, id := range s.st.Replicas() {
		if id == self || !slices.Contains(isr, id) {
			continue
		}
		f, known := s.st.Follower(id)
		if !known || f.LogEndOffset < fetchOffset || f.LogStartOffset > fetchOffset {
			continue
		}
		followers = append(followers, ReadReplica{ID: id, LogEndOffset: f.LogEndOffset,
			SinceCaughtUp: time.Duration(nowMs-f.LastCaughtUpTimeMs) * time.Millisecond})
	}
	return leader, followers, true
}
