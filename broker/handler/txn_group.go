package handler

// LinkTxnGroups makes every transaction marker the transaction coordinator
// writes to a __consumer_offsets partition settle the group coordinator's
// pending transactional offsets of that producer: visible on commit,
// dropped on abort (Kafka's GroupCoordinator.onTransactionCompleted, called
// after the marker is appended). The composition root calls it once both
// coordinators exist.
func LinkTxnGroups(t *TxnCoordinator, g *GroupCoordinator) {
	t.OnOffsetsMarker(func(partition int32, producerID int64, _ int16, commit bool) {
		g.settleTxnOffsets(partition, producerID, commit)
	})
}

// settleTxnOffsets runs CompleteTransaction on the group coordinator's loop
// and waits until it is queued. A partition not loaded yet needs nothing:
// its load replays the marker from the log.
func (c *GroupCoordinator) settleTxnOffsets(partition int32, producerID int64, commit bool) {
	select {
	case c.calls <- func() {
		if c.m == nil || c.parts == nil {
			return
		}
		c.m.CompleteTransaction(partition, producerID, commit)
		c.process()
	}:
	case <-c.stop:
	}
}
