package record

import (
	"errors"
	"fmt"
	"strings"
)

// Checks are the per-record checks of Kafka's LogValidator.validateRecord
// that Check applies while it reads a batch's records.
type Checks struct {
	Limits
	// RequireKeys refuses records without a key (a compacted topic).
	RequireKeys bool
	// TopicLogAppendTime is set when the topic's message.timestamp.type is
	// LogAppendTime; then a batch the producer marked LogAppendTime is
	// refused record by record, as LogValidator.validateTimestamp does.
	TopicLogAppendTime bool
	// CheckTimestamps applies message.timestamp.before.max.ms and
	// after.max.ms (BeforeMaxMs, AfterMaxMs) around NowMs to every
	// CreateTime record timestamp.
	CheckTimestamps         bool
	NowMs                   int64
	BeforeMaxMs, AfterMaxMs int64
	// Partition names the topic partition in messages, as Kafka's do; it
	// is formatted only when a record is refused.
	Partition fmt.Stringer
}

// Result is what Check learns of a valid batch.
type Result struct {
	// MaxTimestamp is the largest record timestamp (NoTimestamp when no
	// record has one), and MaxTimestampDelta the position in the batch
	// (its offset delta once offsets run 0,1,2...) of the first record
	// that has it (-1 when none).
	MaxTimestamp      int64
	MaxTimestampDelta int32
	// Rebuild is set for a compressed batch whose records' offset deltas
	// do not run 0,1,2...: Kafka's LogValidator then rebuilds the batch
	// instead of assigning offsets in place, and so must the caller (see
	// Batch.Rebuild). An uncompressed batch with such deltas is refused.
	Rebuild bool
}

// MaxRecordErrors caps the record errors a ValidationError keeps: Kafka
// lists every failing record, which for a batch of millions of records
// would be an answer far larger than the request.
const MaxRecordErrors = 1000

// RecordError is one refused record: its index in the batch and Kafka's
// message (ProduceResponse's BatchIndex and BatchIndexErrorMessage).
type RecordError struct {
	Index   int32
	Message string
}

// String formats the error as Kafka's ProduceResponse.RecordError does.
func (e RecordError) String() string {
	return fmt.Sprintf("RecordError(batchIndex=%d, message='%s')", e.Index, e.Message)
}

// ValidationError is Kafka's RecordValidationException: records of a batch
// that failed LogValidator.validateRecord. Timestamp is set when one of
// them failed the timestamp checks, which makes the whole batch
// INVALID_TIMESTAMP rather than INVALID_RECORD.
type ValidationError struct {
	Timestamp bool
	Records   []RecordError // at most MaxRecordErrors
	Total     int           // records that failed
}

// Error returns the message of the exception Kafka wraps the record
// errors in (LogValidator.processRecordErrors).
func (e *ValidationError) Error() string {
	if e.Timestamp {
		return "One or more records have been rejected due to invalid timestamp"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "One or more records have been rejected due to %d record errors in total, and only showing the first three errors at most: [", e.Total)
	for i, r := range e.Records[:min(len(e.Records), 3)] {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(r.String())
	}
	b.WriteString("]")
	return b.String()
}

// checker applies Checks record by record and keeps the Result. The batch
// fields it needs per record are read once.
type checker struct {
	b       Batch
	c       Checks
	res     Result
	index   int32
	verr    *ValidationError
	baseTS  int64
	latTS   int64 // the batch's max timestamp when it is LogAppendTime
	lat     bool  // the producer marked the batch LogAppendTime
	control bool
	// compressed batches with irregular offset deltas are rebuilt,
	// uncompressed ones refused.
	compressed bool
}

func newChecker(b Batch, c Checks) checker {
	return checker{b: b, c: c, res: Result{MaxTimestamp: NoTimestamp, MaxTimestampDelta: -1},
		baseTS: b.BaseTimestamp(), latTS: b.MaxTimestamp(), lat: b.LogAppendTime(), control: b.Control(),
		compressed: b.Codec() != CodecNone}
}

func (k *checker) fail(timestamp bool, msg string) {
	if k.verr == nil {
		k.verr = &ValidationError{}
	}
	k.verr.Total++
	k.verr.Timestamp = k.verr.Timestamp || timestamp
	if len(k.verr.Records) < MaxRecordErrors {
		k.verr.Records = append(k.verr.Records, RecordError{Index: k.index, Message: msg})
	}
}

// record checks one record. Structural errors end the iteration; record
// errors are collected and the iteration goes on, as LogValidator does.
func (k *checker) record(r *Record) error {
	if r.OffsetDelta != k.index {
		if !k.compressed {
			return fmt.Errorf("%w: record %d has offset delta %d", ErrRecords, k.index, r.OffsetDelta)
		}
		// As LogValidator: inner offsets that do not run 0,1,2...
		// turn in-place assignment off and the batch is rebuilt.
		k.res.Rebuild = true
	}
	if k.control {
		if _, err := ParseControl(*r); err != nil {
			return err
		}
	}
	// DefaultRecordBatch: the records of a LogAppendTime batch all carry
	// the batch's max timestamp.
	ts := k.baseTS + r.TimestampDelta
	if k.lat {
		ts = k.latTS
	}
	switch {
	case k.c.RequireKeys && r.Key == nil:
		k.fail(false, "Compacted topic cannot accept message without key in topic partition "+partitionName(k.c.Partition))
	case !k.c.TopicLogAppendTime && ts != NoTimestamp:
		if k.c.CheckTimestamps {
			// LogValidator.recordHasInvalidTimestamp, with Java's
			// wrapping long arithmetic.
			now := k.c.NowMs
			if diff := now - ts; diff > k.c.BeforeMaxMs || -diff > k.c.AfterMaxMs {
				k.fail(true, fmt.Sprintf("Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]",
					ts, k.b.BaseOffset()+int64(r.OffsetDelta), now-k.c.BeforeMaxMs, now+k.c.AfterMaxMs))
			}
		}
	case k.lat:
		k.fail(true, fmt.Sprintf("Invalid timestamp type in message DefaultRecord(offset=%d, timestamp=%d, key=%d bytes, value=%d bytes). Producer should not set timestamp type to LogAppendTime.",
			k.b.BaseOffset()+int64(r.OffsetDelta), ts, len(r.Key), len(r.Value)))
	}
	if ts > k.res.MaxTimestamp {
		k.res.MaxTimestamp, k.res.MaxTimestampDelta = ts, k.index
	}
	k.index++
	return nil
}

// Check validates the records of b as Kafka's LogValidator does while it
// assigns offsets: each record parses within its declared size, offset
// deltas run 0,1,2,... without gaps, the number of records equals
// recordCount, a control batch holds exactly one well-formed control
// record, and each record passes c's key and timestamp checks. It returns
// the true maximum timestamp of the records, whatever the header says.
//
// A compressed payload is streamed through a fixed window rather than
// inflated: Check holds at most b.DecodeMemory(c.Limits) bytes of decoding
// state, and no more than c.Limits.Bound() for any batch.
//
// Errors: ErrRecords, ErrControl and the codec errors for a malformed batch,
// ErrTooLarge past c.MaxBytes, ErrDecodeMemory past c.MaxMemory, and a
// *ValidationError for records refused by the checks.
func (b Batch) Check(c Checks) (Result, error) {
	k := newChecker(b, c)
	count := b.RecordCount()
	if b.Codec() == CodecNone {
		if err := k.inPlace(b.Payload(), count); err != nil {
			return Result{}, err
		}
	} else {
		s, err := openScanner(b, c.Limits)
		if err != nil {
			return Result{}, err
		}
		err = k.stream(s, count)
		s.close()
		if err != nil {
			return Result{}, err
		}
	}
	if k.index != count {
		return Result{}, fmt.Errorf("%w: %d records, header says %d", ErrRecords, k.index, count)
	}
	if b.Control() && k.index != 1 {
		return Result{}, fmt.Errorf("%w: control batch with %d records", ErrControl, k.index)
	}
	if k.verr != nil {
		return Result{}, k.verr
	}
	return k.res, nil
}

// inPlace checks count records parsed where they lie in p, as Iter does
// but decoding each into the same Record: this is the produce path of every
// uncompressed batch.
func (k *checker) inPlace(p []byte, count int32) error {
	var r Record
	for i := int32(0); i < count; i++ {
		size, rest, err := readVarint32(p)
		if err == nil && (size < 0 || int(size) > len(rest)) {
			err = fmt.Errorf("record size %d out of range", size)
		}
		if err == nil {
			err = parseBody(&r, rest[:size], size)
		}
		if err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrRecords, i, err)
		}
		p = rest[size:]
		if err := k.record(&r); err != nil {
			return err
		}
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d bytes after the last record", ErrRecords, len(p))
	}
	return nil
}

// stream checks count records read from s, then that nothing follows them.
func (k *checker) stream(s *scanner, count int32) error {
	var r Record
	for i := int32(0); i < count; i++ {
		if err := s.next(&r); err != nil {
			if isRecordsErr(err) {
				return err
			}
			return fmt.Errorf("%w: record %d: %v", ErrRecords, i, err)
		}
		if err := k.record(&r); err != nil {
			return err
		}
	}
	extra, err := s.atEnd()
	if err != nil {
		return err
	}
	if extra > 0 {
		return fmt.Errorf("%w: bytes after the last record", ErrRecords)
	}
	return nil
}

// isRecordsErr reports whether err already carries one of the package's
// sentinels (from the decompressor or the limits).
func isRecordsErr(err error) bool {
	for _, s := range []error{ErrRecords, ErrTooLarge, ErrDecodeMemory} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func partitionName(p fmt.Stringer) string {
	if p == nil {
		return "unknown"
	}
	return p.String()
}
