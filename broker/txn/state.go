package txn

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// State is a transaction's state, numbered as Kafka's TransactionState ids
// (the TransactionStatus field of __transaction_state values).
type State int8

// The states of Kafka's TransactionState.
const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
	"CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func (s State) valid() bool { return s >= 0 && int(s) < len(stateNames) }

// String returns the state's name as DescribeTransactions and
// ListTransactions report it (Kafka's TransactionState.stateName).
func (s State) String() string {
	if s.valid() {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// ParseState returns the state named name, as ListTransactions filters name
// them.
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// validPrevious lists, for each state, the states it may be entered from
// (Kafka's TransactionState.validPreviousStates). PrepareAbort may follow
// Empty and Complete* only for transactions v2, where a client may abort
// without having added a partition (TransactionCoordinator.endTransaction).
var validPrevious = map[State][]State{
	Empty:             {Empty, CompleteCommit, CompleteAbort},
	Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:     {Ongoing},
	PrepareAbort:      {Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort},
	CompleteCommit:    {PrepareCommit},
	CompleteAbort:     {PrepareAbort},
	Dead:              {Empty, CompleteCommit, CompleteAbort},
	PrepareEpochFence: {Ongoing},
}

func canTransition(from, to State) bool {
	for _, s := range validPrevious[to] {
		if s == from {
			return true
		}
	}
	return false
}

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

func sortPartitions(ps []TopicPartition) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Topic != ps[j].Topic {
			return ps[i].Topic < ps[j].Topic
		}
		return ps[i].Partition < ps[j].Partition
	})
}

// Errors the coordinator answers with. The handler edge maps each to the
// Kafka error code named in its comment.
var (
	ErrInvalidRequest           = errors.New("txn: invalid request")                            // INVALID_REQUEST
	ErrInvalidTimeout           = errors.New("txn: invalid transaction timeout")                // INVALID_TRANSACTION_TIMEOUT
	ErrConcurrentTransactions   = errors.New("txn: concurrent transactions")                    // CONCURRENT_TRANSACTIONS
	ErrProducerFenced           = errors.New("txn: producer fenced")                            // PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before KIP-588)
	ErrInvalidProducerIDMapping = errors.New("txn: invalid producer id mapping")                // INVALID_PRODUCER_ID_MAPPING
	ErrInvalidTxnState          = errors.New("txn: invalid transaction state")                  // INVALID_TXN_STATE
	ErrTransactionAbortable     = errors.New("txn: partition not in transaction")               // TRANSACTION_ABORTABLE
	ErrTransactionalIDNotFound  = errors.New("txn: transactional id not found")                 // TRANSACTIONAL_ID_NOT_FOUND
	ErrNotCoordinator           = errors.New("txn: not the coordinator")                        // NOT_COORDINATOR
	ErrCoordinatorNotAvailable  = errors.New("txn: coordinator not available")                  // COORDINATOR_NOT_AVAILABLE
	ErrCoordinatorLoading       = errors.New("txn: coordinator loading")                        // COORDINATOR_LOAD_IN_PROGRESS
	ErrUnknown                  = errors.New("txn: unexpected failure writing transaction log") // UNKNOWN_SERVER_ERROR
)

// PartitionFor returns the partition of an internal topic with n partitions
// that owns key: abs(key.hashCode()) % n, with Java's String.hashCode over
// UTF-16 code units and Kafka's Utils.abs (which maps MinInt32 to 0). Kafka
// places transactional ids in __transaction_state and group ids in
// __consumer_offsets this way.
func PartitionFor(key string, n int32) int32 {
	var h int32
	for _, r := range key {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	switch {
	case h == math.MinInt32:
		h = 0
	case h < 0:
		h = -h
	}
	return h % n
}
