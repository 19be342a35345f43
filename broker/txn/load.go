package txn

import (
	"fmt"
	"sort"
)

// Replay applies one record of __transaction_state read at load, in log
// order; a nil value is a tombstone. As Kafka's
// TransactionStateManager.loadTransactionMetadata, the last record of an id
// wins and the previous producer epoch is not known after a load.
func (c *Coordinator) Replay(key, value []byte) error {
	id, err := DecodeKey(key)
	if err != nil {
		return err
	}
	if value == nil {
		delete(c.txns, id)
		return nil
	}
	v, err := DecodeValue(value)
	if err != nil {
		return fmt.Errorf("transactional id %q: %w", id, err)
	}
	switch v.State {
	case Dead, PrepareEpochFence:
		// Never written by a coordinator.
		return fmt.Errorf("%w: transactional id %q logged in state %s", ErrBadRecord, id, v.State)
	}
	c.txns[id] = &meta{id: id, fields: fields{
		producerID:     v.ProducerID,
		prevProducerID: v.PreviousProducerID,
		nextProducerID: v.NextProducerID,
		epoch:          v.ProducerEpoch,
		lastEpoch:      noEpoch,
		timeoutMs:      v.TimeoutMs,
		state:          v.State,
		partitions:     v.Partitions,
		startMs:        v.StartMs,
		updateMs:       v.LastUpdateMs,
		clientTV:       v.ClientTransactionVersion,
	}}
	return nil
}

// Loaded ends the load: the coordinator starts answering requests, and the
// markers of transactions left in PrepareCommit or PrepareAbort are handed
// out again. Ongoing transactions are aborted by Tick once they time out.
func (c *Coordinator) Loaded() Output {
	c.loading = false
	var out Output
	for _, id := range c.sortedIDs() {
		m := c.txns[id]
		if m.state == PrepareCommit || m.state == PrepareAbort {
			o := c.startMarkers(m)
			out.Markers = append(out.Markers, o.Markers...)
		}
	}
	return out
}

func (c *Coordinator) sortedIDs() []string {
	ids := make([]string, 0, len(c.txns))
	for id := range c.txns {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Description is one transactional id's state as DescribeTransactions and
// ListTransactions report it.
type Description struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	State           State
	TimeoutMs       int32
	StartMs         int64
	Partitions      []TopicPartition
}

func (m *meta) describe() Description {
	return Description{
		TransactionalID: m.id,
		ProducerID:      m.producerID,
		ProducerEpoch:   m.epoch,
		State:           m.state,
		TimeoutMs:       m.timeoutMs,
		StartMs:         m.startMs,
		Partitions:      append([]TopicPartition(nil), m.partitions...),
	}
}

// Describe answers DescribeTransactions for one id (Kafka's
// handleDescribeTransactions).
func (c *Coordinator) Describe(id string) (Description, error) {
	switch {
	case c.loading:
		return Description{}, ErrCoordinatorLoading
	case id == "":
		return Description{}, ErrInvalidRequest
	}
	m := c.txns[id]
	if m == nil || m.state == Dead {
		return Description{}, ErrTransactionalIDNotFound
	}
	return m.describe(), nil
}

// ListFilter selects transactions for ListTransactions; empty filters
// match everything.
type ListFilter struct {
	States      []string
	ProducerIDs []int64
	// DurationMs, when >= 0, keeps transactions running longer than this
	// (ListTransactions v1, KIP-994).
	DurationMs int64
}

// List answers ListTransactions (Kafka's
// TransactionStateManager.listTransactionStates): the matching
// transactions in id order, and the state names of the filter that are not
// states.
func (c *Coordinator) List(f ListFilter, nowMs int64) (txns []Description, unknownStates []string, err error) {
	if c.loading {
		return nil, nil, ErrCoordinatorLoading
	}
	states := map[State]bool{}
	for _, name := range f.States {
		if s, ok := ParseState(name); ok {
			states[s] = true
		} else {
			unknownStates = append(unknownStates, name)
		}
	}
	if len(f.States) > 0 && len(states) == 0 {
		// Only unknown states asked for: nothing can match.
		return nil, unknownStates, nil
	}
	pids := map[int64]bool{}
	for _, p := range f.ProducerIDs {
		pids[p] = true
	}
	for _, id := range c.sortedIDs() {
		m := c.txns[id]
		switch {
		case m.state == Dead:
		case len(pids) > 0 && !pids[m.producerID]:
		case len(states) > 0 && !states[m.state]:
		case f.DurationMs >= 0 && nowMs-m.startMs <= f.DurationMs:
		default:
			txns = append(txns, m.describe())
		}
	}
	return txns, unknownStates, nil
}
