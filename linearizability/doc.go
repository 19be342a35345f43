// Package linearizability owns Cascade's history format and the checkers that
// judge a recorded history of Kafka operations.
//
// A history is JSON lines, one Op per line, with call and return times in
// nanoseconds on one clock (see README.md in this directory for the format,
// which every recorder in the matrix and the fault suites writes). A Recorder
// stamps operations from one monotonic clock and is safe for concurrent use:
//
//	rec := linearizability.NewRecorder(w)
//	done := rec.Begin()
//	off, err := produce(v)
//	rec.End(done, linearizability.Op{Client: "franz-1", Op: linearizability.OpProduce,
//		Topic: "t", Partition: 0, Value: v, Outcome: outcomeOf(err), Offset: linearizability.Int64(off)})
//
// Check runs two kinds of checks. Direct checks (lost write, duplicate,
// inconsistent offset, wrong read, non-monotonic fetch, committed offset going
// backwards, aborted read, read of an open transaction, a transaction read
// both committed and aborted, a marker no transaction explains, a
// partition owned by two group members in one generation, unseen
// write) are single passes over the history and scale to millions of
// operations. Transaction markers are read off the fetches (txn.go), so
// the repeated markers and coordinator-initiated aborts Apache Kafka
// shows are accepted and checked directly, not searched for.
// Linearizability is checked with porcupine one topic-partition (and one
// group-partition for committed offsets) at a time, with a compact model
// state (next offset, running hash) and markers at the offsets the fetches
// show; operations with an "unknown" outcome may or may not have taken
// effect. The porcupine check is bounded by a timeout, and a check that
// times out reports Unknown, never valid.
package linearizability
