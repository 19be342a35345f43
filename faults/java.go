package faults

import (
	"context"
	"errors"
	"fmt"
	"time"

	lin "github.com/cascade-kafka/cascade/linearizability"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// javaCallTimeout bounds one command to the Java driver. The driver's
// producer gives up after delivery.timeout.ms (15 s) and closes within 2 s,
// its consumer after the command's timeout_ms plus a 2 s end-offsets query;
// a command still unanswered after this bound means a wedged JVM, which
// the driver's process API kills.
const javaCallTimeout = 40 * time.Second

// javaDriver is one Java driver process (the matrix's JVM running Apache
// Kafka's own client), reopened when a command leaves it broken.
type javaDriver struct {
	w    *Workload
	name string
	d    driver.Driver
}

func (j *javaDriver) get(ctx context.Context) (driver.Driver, error) {
	if j.d != nil {
		return j.d, nil
	}
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	d, err := j.w.Java(octx, j.w.Bootstrap)
	if err != nil {
		return nil, fmt.Errorf("%s: opening the Java driver: %w", j.name, err)
	}
	j.d = d
	return d, nil
}

// broken closes a driver whose process no longer answers in step, so the
// next command opens a new one.
func (j *javaDriver) broken(err error) {
	j.w.logf("%s: Java driver broken (%v); reopening", j.name, err)
	if cerr := j.d.Close(); cerr != nil {
		j.w.logf("%s: closing the broken Java driver: %v", j.name, cerr)
	}
	j.d = nil
}

func (j *javaDriver) close() error {
	if j.d == nil {
		return nil
	}
	err := j.d.Close()
	j.d = nil
	return err
}

// commandError reports whether err is the driver's answer to a command (a
// Kafka or client error name), as opposed to a process that no longer
// answers (killed on a timeout, exited).
func commandError(err error) (*driver.Error, bool) {
	var de *driver.Error
	return de, errors.As(err, &de)
}

// produceJava writes unique values "j<i>-<n>" round robin over the
// partitions with the Java driver, one record per produce command. The
// driver builds an idempotent KafkaProducer (acks=all) per command, so its
// retries within delivery.timeout.ms keep one producer id; the call and
// return times bracket the whole command.
func (w *Workload) produceJava(ctx context.Context, i int) (err error) {
	j := &javaDriver{w: w, name: fmt.Sprintf("java-producer-%d", i)}
	defer func() { err = errors.Join(err, j.close()) }()
	for n := 0; ctx.Err() == nil; n++ {
		d, err := j.get(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil // the run ended while a JVM started
			}
			return err
		}
		p := int32((n + i) % int(w.Partitions))
		v := fmt.Sprintf("j%d-%d", i, n)
		op := lin.Op{Client: j.name, Op: lin.OpProduce, Topic: w.Topic, Partition: p, Value: v, Outcome: lin.OutcomeOK}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), javaCallTimeout)
		call := w.Rec.Now()
		res, perr := d.Produce(cctx, driver.Produce{Topic: w.Topic, Acks: -1, Idempotent: true,
			Records: []driver.Record{{Partition: p, Value: []byte(v)}}})
		end := w.Rec.Now()
		cancel()
		switch de, isCmd := commandError(perr); {
		case perr == nil && len(res.Deliveries) != 1:
			op.Outcome = lin.OutcomeUnknown
			op.Error = &lin.OpError{Code: "client", Message: fmt.Sprintf("%d deliveries for one record", len(res.Deliveries))}
		case perr == nil && res.Deliveries[0].Error != nil:
			de := res.Deliveries[0].Error
			op.Outcome, op.Error = lin.OutcomeUnknown, &lin.OpError{Code: de.Code, Message: de.Message}
			if de.Code == "CLIENT_UNKNOWN_TOPIC" {
				// KafkaProducer.send gave up waiting for metadata
				// (max.block.ms) before the record joined a batch.
				op.Outcome = lin.OutcomeFail
			}
		case perr == nil:
			op.Offset = lin.Int64(res.Deliveries[0].Offset)
		case isCmd:
			// The command failed before sending: the driver's produce
			// answers command errors only for bad arguments and a
			// KafkaProducer that could not be built.
			op.Outcome, op.Error = lin.OutcomeFail, &lin.OpError{Code: de.Code, Message: de.Message}
		default:
			op.Outcome, op.Error = lin.OutcomeUnknown, &lin.OpError{Code: "client", Message: perr.Error()}
			j.broken(perr)
		}
		if err := w.Rec.Add(withTimes(op, call, end)); err != nil {
			return err
		}
		w.count(op.Outcome == lin.OutcomeOK)
	}
	return nil
}

// consumeJava reads the partitions in turn with the Java driver's consume
// command (a KafkaConsumer assigned to one partition and seeked to the
// consumer's position), recording each command as one fetch whose records
// are what the consumer delivered and whose high watermark is the end
// offset the driver queried before answering.
func (w *Workload) consumeJava(ctx context.Context, i int) (err error) {
	j := &javaDriver{w: w, name: fmt.Sprintf("java-consumer-%d", i)}
	defer func() { err = errors.Join(err, j.close()) }()
	pos := make([]int64, w.Partitions)
	for n := 0; ctx.Err() == nil; n++ {
		d, err := j.get(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil // the run ended while a JVM started
			}
			return err
		}
		p := int32(n % int(w.Partitions))
		op := lin.Op{Client: j.name, Op: lin.OpFetch, Topic: w.Topic, Partition: p, From: lin.Int64(pos[p]),
			Isolation: lin.ReadUncommitted, Outcome: lin.OutcomeFail}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), javaCallTimeout)
		call := w.Rec.Now()
		res, cerr := d.Consume(cctx, driver.Consume{Topic: w.Topic, Partition: p, From: pos[p], Count: 500, TimeoutMs: 1000})
		end := w.Rec.Now()
		cancel()
		switch de, isCmd := commandError(cerr); {
		case cerr == nil && res.Error != nil:
			op.Error = &lin.OpError{Code: res.Error.Code, Message: res.Error.Message}
			if res.Error.Code == "OFFSET_OUT_OF_RANGE" {
				pos[p] = 0 // the log lost its tail; read again from the start
			}
		case cerr == nil:
			op.Outcome = lin.OutcomeOK
			if res.HighWatermark >= 0 {
				op.HighWatermark = lin.Int64(res.HighWatermark)
			}
			for _, r := range res.Records {
				op.Records = append(op.Records, lin.Record{Offset: r.Offset, Value: string(r.Value)})
				pos[p] = r.Offset + 1
			}
		case isCmd:
			op.Error = &lin.OpError{Code: de.Code, Message: de.Message}
		default:
			op.Error = &lin.OpError{Code: "client", Message: cerr.Error()}
			j.broken(cerr)
		}
		if err := w.Rec.Add(withTimes(op, call, end)); err != nil {
			return err
		}
	}
	return nil
}

// withTimes stamps op with the times of a call that already returned, so
// the time spent closing a broken driver is not counted in it.
func withTimes(op lin.Op, call, end int64) lin.Op {
	op.CallNs, op.ReturnNs = call, end
	return op
}
