package wire

import (
	"unsafe"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// API keys whose requests are sized by scanning besides Produce and
// Metadata: those whose legitimate requests grow with a group's members or
// a cluster's partitions past the capped frame size (offsets of 20,000
// partitions with their metadata strings; a SyncGroup carrying a 500-member
// assignment; CreateTopics of thousands of partitions).
const (
	listOffsetsKey     = 2
	offsetCommitKey    = 8
	joinGroupKey       = 11
	syncGroupKey       = 14
	createTopicsKey    = 19
	txnOffsetCommitKey = 28
	describeConfigsKey = 32
)

// decodeCapped reports whether key's requests are sized by scanning and
// held to a decoded size of at most socket.request.max.bytes: their frames
// may be as large as socket.request.max.bytes, like Produce's, but a frame
// whose scanned decode would exceed that closes the connection before it is
// decoded. So one such request never reserves more than one maximum-size
// frame, the bound the capped APIs keep.
func decodeCapped(key int16) bool {
	switch key {
	case listOffsetsKey, offsetCommitKey, joinGroupKey, syncGroupKey, createTopicsKey,
		txnOffsetCommitKey, describeConfigsKey:
		return true
	}
	return false
}

// scanBody dispatches to the scanner of a decodeCapped key; ok is false
// for any other key.
func (s *scanner) scanBody(key, version int16) (int64, bool) {
	switch key {
	case listOffsetsKey:
		return s.listOffsets(version), true
	case offsetCommitKey:
		return s.offsetCommit(version), true
	case joinGroupKey:
		return s.joinGroup(version), true
	case syncGroupKey:
		return s.syncGroup(version), true
	case createTopicsKey:
		return s.createTopics(version), true
	case txnOffsetCommitKey:
		return s.txnOffsetCommit(version), true
	case describeConfigsKey:
		return s.describeConfigs(version), true
	}
	return 0, false
}

// bytes skips a bytes field, which kmsg aliases to the frame.
func (s *scanner) bytes() {
	if n := s.length(true); n > 0 {
		s.skip(n)
	}
}

func (s *scanner) offsetCommit(version int16) int64 {
	cost := s.str() // Group
	if version >= 1 {
		s.skip(4)       // Generation
		cost += s.str() // MemberID
	}
	if version >= 7 {
		cost += s.str() // InstanceID
	}
	if version >= 2 && version <= 4 {
		s.skip(8) // RetentionTimeMillis
	}
	topics := s.array()
	cost += sliceCost(topics, unsafe.Sizeof(kmsg.OffsetCommitRequestTopic{}))
	for i := 0; i < topics && !s.bad; i++ {
		if version >= 10 {
			s.skip(16) // TopicID
		} else {
			cost += s.str()
		}
		parts := s.array()
		cost += sliceCost(parts, unsafe.Sizeof(kmsg.OffsetCommitRequestTopicPartition{}))
		for j := 0; j < parts && !s.bad; j++ {
			s.skip(4 + 8) // Partition, Offset
			if version == 1 {
				s.skip(8) // Timestamp
			}
			if version >= 6 {
				s.skip(4) // LeaderEpoch
			}
			cost += s.str() // Metadata
			cost += s.tags()
		}
		cost += s.tags()
	}
	return cost + s.tags()
}

func (s *scanner) txnOffsetCommit(version int16) int64 {
	cost := s.str() + s.str() // TransactionalID, Group
	s.skip(8 + 2)             // ProducerID, ProducerEpoch
	if version >= 3 {
		s.skip(4)                 // Generation
		cost += s.str() + s.str() // MemberID, InstanceID
	}
	topics := s.array()
	cost += sliceCost(topics, unsafe.Sizeof(kmsg.TxnOffsetCommitRequestTopic{}))
	for i := 0; i < topics && !s.bad; i++ {
		if version >= 6 {
			s.skip(16) // TopicID
		} else {
			cost += s.str()
		}
		parts := s.array()
		cost += sliceCost(parts, unsafe.Sizeof(kmsg.TxnOffsetCommitRequestTopicPartition{}))
		for j := 0; j < parts && !s.bad; j++ {
			s.skip(4 + 8) // Partition, Offset
			if version >= 2 {
				s.skip(4) // LeaderEpoch
			}
			cost += s.str() // Metadata
			cost += s.tags()
		}
		cost += s.tags()
	}
	return cost + s.tags()
}

func (s *scanner) listOffsets(version int16) int64 {
	var cost int64
	s.skip(4) // ReplicaID
	if version >= 2 {
		s.skip(1) // IsolationLevel
	}
	topics := s.array()
	cost += sliceCost(topics, unsafe.Sizeof(kmsg.ListOffsetsRequestTopic{}))
	for i := 0; i < topics && !s.bad; i++ {
		cost += s.str()
		parts := s.array()
		cost += sliceCost(parts, unsafe.Sizeof(kmsg.ListOffsetsRequestTopicPartition{}))
		for j := 0; j < parts && !s.bad; j++ {
			s.skip(4) // Partition
			if version >= 4 {
				s.skip(4) // CurrentLeaderEpoch
			}
			s.skip(8) // Timestamp
			if version == 0 {
				s.skip(4) // MaxNumOffsets
			}
			cost += s.tags()
		}
		cost += s.tags()
	}
	if version >= 10 {
		s.skip(4) // TimeoutMillis
	}
	return cost + s.tags()
}

func (s *scanner) describeConfigs(version int16) int64 {
	var cost int64
	resources := s.array()
	cost += sliceCost(resources, unsafe.Sizeof(kmsg.DescribeConfigsRequestResource{}))
	for i := 0; i < resources && !s.bad; i++ {
		s.skip(1)       // ResourceType
		cost += s.str() // ResourceName
		names := s.array()
		cost += sliceCost(names, unsafe.Sizeof(""))
		for j := 0; j < names && !s.bad; j++ {
			cost += s.str()
		}
		cost += s.tags()
	}
	if version >= 1 {
		s.skip(1) // IncludeSynonyms
	}
	if version >= 3 {
		s.skip(1) // IncludeDocumentation
	}
	return cost + s.tags()
}

func (s *scanner) createTopics(version int16) int64 {
	var cost int64
	topics := s.array()
	cost += sliceCost(topics, unsafe.Sizeof(kmsg.CreateTopicsRequestTopic{}))
	for i := 0; i < topics && !s.bad; i++ {
		cost += s.str() // Topic
		s.skip(4 + 2)   // NumPartitions, ReplicationFactor
		assignments := s.array()
		cost += sliceCost(assignments, unsafe.Sizeof(kmsg.CreateTopicsRequestTopicReplicaAssignment{}))
		for j := 0; j < assignments && !s.bad; j++ {
			s.skip(4) // Partition
			replicas := s.array()
			cost += sliceCost(replicas, 4)
			s.skip(4 * replicas)
			cost += s.tags()
		}
		configs := s.array()
		cost += sliceCost(configs, unsafe.Sizeof(kmsg.CreateTopicsRequestTopicConfig{}))
		for j := 0; j < configs && !s.bad; j++ {
			cost += s.str() + s.str() // Name, Value
			cost += s.tags()
		}
		cost += s.tags()
	}
	s.skip(4) // TimeoutMillis
	if version >= 1 {
		s.skip(1) // ValidateOnly
	}
	return cost + s.tags()
}

func (s *scanner) joinGroup(version int16) int64 {
	cost := s.str() // Group
	s.skip(4)       // SessionTimeoutMillis
	if version >= 1 {
		s.skip(4) // RebalanceTimeoutMillis
	}
	cost += s.str() // MemberID
	if version >= 5 {
		cost += s.str() // InstanceID
	}
	cost += s.str() // ProtocolType
	protocols := s.array()
	cost += sliceCost(protocols, unsafe.Sizeof(kmsg.JoinGroupRequestProtocol{}))
	for i := 0; i < protocols && !s.bad; i++ {
		cost += s.str() // Name
		s.bytes()       // Metadata
		cost += s.tags()
	}
	if version >= 8 {
		cost += s.str() // Reason
	}
	return cost + s.tags()
}

func (s *scanner) syncGroup(version int16) int64 {
	cost := s.str() // Group
	s.skip(4)       // Generation
	cost += s.str() // MemberID
	if version >= 3 {
		cost += s.str() // InstanceID
	}
	if version >= 5 {
		cost += s.str() + s.str() // ProtocolType, Protocol
	}
	assignments := s.array()
	cost += sliceCost(assignments, unsafe.Sizeof(kmsg.SyncGroupRequestGroupAssignment{}))
	for i := 0; i < assignments && !s.bad; i++ {
		cost += s.str() // MemberID
		s.bytes()       // MemberAssignment
		cost += s.tags()
	}
	return cost + s.tags()
}
