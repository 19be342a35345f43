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
// Both transaction protocols are implemented, chosen per request as Kafka's
// TransactionVersion does. Transactions v1: the client adds partitions with
// AddPartitionsToTxn v0-3 and AddOffsetsToTxn, and the epoch is bumped only
// by InitProducerId; a partition leader checks a producer's first batch
// with Verify (AddPartitionsToTxn v4+ VerifyOnly, KIP-890 part 1).
// Transactions v2 (KIP-890 part 2), for requests marked TransactionVersion
// 2: partitions are added on the producer's behalf by the partition leader
// (Produce v12, TxnOffsetCommit v5), and every EndTxn (v5) bumps the epoch,
// writes the markers with the bumped epoch and answers with the producer id
// and epoch to use next; when the epoch would reach Short.MAX_VALUE a new
// producer id is allocated and taken when the transaction completes.
// Config.TransactionVersion is the broker's finalized level: at 2 the
// coordinator's own aborts (timeouts, fencing) are v2 aborts too, and
// __transaction_state values are written in their flexible version 1 with
// the previous and next producer ids and the client's transaction version.
package txn
