// Package txn is Cascade's transaction coordinator as a pure state machine,
// in the etcd-raft style: no goroutines, clock, disk or network inside. It
// owns the state of every transactional id led by this broker (Kafka's
// TransactionMetadata), the transitions between Kafka's transaction states,
// and the key/value records of the internal topic __transaction_state in
// Apache Kafka's exact schemas (TransactionLogKey, TransactionLogValue v0-1).
//
// The caller (the coordinator runtime next to the handlers) feeds it inputs
// and carries out what each returned Output asks:
//
//	out := c.EndTxn(txn.EndTxnRequest{...}, nowMs)
//	// out.Reply answers the request now, or out.Write must be appended to
//	// __transaction_state; then:
//	out = c.Appended(out.Write.Op, appendErr)
//	// out.Reply answers the request; out.Markers lists commit/abort markers
//	// to write to data partitions; once all are written:
//	out = c.MarkersWritten(transactionalID)
//	// out.Write completes the transaction (CompleteCommit/CompleteAbort).
//
// Tick(now) aborts transactions older than their timeout (fencing the
// producer with a bumped epoch, as Kafka's abortTimedOutTransactions) and
// expires idle transactional ids. At start the runtime replays the records of
// __transaction_state through Replay, then calls Loaded, which resumes the
// marker writes of transactions left in PrepareCommit or PrepareAbort.
//
// Transactions v1 are implemented (the client adds partitions with
// AddPartitionsToTxn, the epoch is bumped only by InitProducerId). The
// batched broker form of AddPartitionsToTxn (v4+, verify-only, KIP-890 part 1)
// is answered by Verify.
package txn
