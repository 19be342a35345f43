package faults

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	lin "github.com/cascade-kafka/cascade/linearizability"
)

// confluentMessageTimeout is librdkafka's message.timeout.ms for the
// workload: as franz-go's delivery timeout, short enough that a fault
// turns into an unknown outcome instead of a stuck producer.
const confluentMessageTimeout = 4 * time.Second

// confluentStuckAfter is how many deliveries in a row may time out before
// the producer is replaced: three message timeouts, well inside the
// liveness bound after the final heal.
const confluentStuckAfter = 3

// confluentConfig is the producer configuration: idempotent, acks=all, no
// batching delay, and timeouts and backoffs scaled to faults that last a
// second or two. request.timeout.ms (a topic property librdkafka accepts
// globally) makes a blackholed connection time out within the message
// timeout.
func (w *Workload) confluentConfig(name string) *kafka.ConfigMap {
	return &kafka.ConfigMap{
		"bootstrap.servers":                  w.Bootstrap,
		"client.id":                          name,
		"enable.idempotence":                 true,
		"acks":                               "all",
		"linger.ms":                          0,
		"message.timeout.ms":                 int(confluentMessageTimeout / time.Millisecond),
		"request.timeout.ms":                 3000,
		"socket.connection.setup.timeout.ms": 2000,
		"retry.backoff.ms":                   50,
		"retry.backoff.max.ms":               500,
		"reconnect.backoff.ms":               50,
		"reconnect.backoff.max.ms":           500,
		"go.logs.channel.enable":             true,
	}
}

// confluentProducer is one librdkafka producer and the goroutines that
// drain its event and log channels into the workload's client log.
type confluentProducer struct {
	p    *kafka.Producer
	done sync.WaitGroup
}

func (w *Workload) newConfluentProducer(name string) (*confluentProducer, error) {
	p, err := kafka.NewProducer(w.confluentConfig(name))
	if err != nil {
		return nil, fmt.Errorf("confluent-kafka-go producer %s: %w", name, err)
	}
	cp := &confluentProducer{p: p}
	cp.done.Add(2)
	go func() {
		defer cp.done.Done()
		for ev := range p.Events() {
			// Delivery reports go to per-message channels; what arrives
			// here are client-level errors (all brokers down, fatal
			// idempotence errors), kept for the artifacts.
			w.logf("%s event: %v", name, ev)
		}
	}()
	go func() {
		defer cp.done.Done()
		for l := range p.Logs() {
			w.logf("%s librdkafka: %s", name, l.Message)
		}
	}()
	return cp, nil
}

// closeConfluent abandons whatever the producer still holds (its outcomes are
// already recorded as unknown) and destroys it.
func (w *Workload) closeConfluent(name string, cp *confluentProducer) {
	if err := cp.p.Purge(kafka.PurgeInFlight | kafka.PurgeQueue | kafka.PurgeNonBlocking); err != nil {
		// Purge fails only on a handle already closed; Close is still safe.
		w.logf("%s purge: %v", name, err)
	}
	cp.p.Close()
	cp.done.Wait()
}

// produceConfluent writes unique values "c<i>-<n>" round robin over the
// partitions, one at a time, with an idempotent confluent-kafka-go
// (librdkafka) producer. The producer lives across operations, so its
// retries reuse its producer id and sequence numbers as an application's
// would; it is replaced only after a fatal error (librdkafka raises one
// when idempotence cannot be kept, as KIP-360's epoch bump failing) or a
// missing delivery report.
func (w *Workload) produceConfluent(ctx context.Context, i int) error {
	name := fmt.Sprintf("confluent-%d", i)
	var cp *confluentProducer
	defer func() {
		if cp != nil {
			w.closeConfluent(name, cp)
		}
	}()
	topic := w.Topic
	timedOut := 0 // deliveries timed out in a row
	for n := 0; ctx.Err() == nil; n++ {
		if cp == nil {
			var err error
			if cp, err = w.newConfluentProducer(name); err != nil {
				return err
			}
		}
		p := int32((n + i) % int(w.Partitions))
		v := fmt.Sprintf("c%d-%d", i, n)
		op := lin.Op{Client: name, Op: lin.OpProduce, Topic: w.Topic, Partition: p, Value: v, Outcome: lin.OutcomeOK}
		dr := make(chan kafka.Event, 1)
		replace := false
		call := w.Rec.Begin()
		err := cp.p.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: p},
			Value: []byte(v)}, dr)
		if err != nil {
			// Produce refused to queue the message (a full queue, a
			// producer in its fatal state): it was never sent.
			op.Outcome, op.Error = lin.OutcomeFail, confluentOpError(err)
			replace = cp.p.GetFatalError() != nil
		} else {
			op.Outcome, op.Error, op.Offset, replace = awaitDelivery(dr)
			replace = replace || cp.p.GetFatalError() != nil
		}
		if err := w.Rec.End(call, op); err != nil {
			return err
		}
		w.count(op.Outcome == lin.OutcomeOK)
		if op.Error != nil && op.Error.Code == kafka.ErrMsgTimedOut.String() {
			timedOut++
		} else {
			timedOut = 0
		}
		if timedOut >= confluentStuckAfter {
			// librdkafka's idempotent producer can stay wedged after
			// a run of faults, its deliveries timing out with every
			// broker up again and other clients served (seen on Apache
			// Kafka and on Cascade alike, its log saying a partition's
			// leader is "not found in cache"): an application restarts
			// such a client, and so does the workload.
			w.logf("%s: replacing the producer after %d deliveries timed out in a row", name, timedOut)
			replace, timedOut = true, 0
		}
		if replace {
			w.logf("%s: replacing the producer (fatal error: %v)", name, cp.p.GetFatalError())
			w.closeConfluent(name, cp)
			cp = nil
		}
	}
	return nil
}

// awaitDelivery waits for one message's delivery report. A failed delivery
// is unknown, never fail: librdkafka reports a timed-out message the same
// whether or not the broker appended it (rd_kafka_message_status is not
// exposed by the Go binding). A report that never comes within the message
// timeout plus a margin asks for the producer to be replaced.
func awaitDelivery(dr <-chan kafka.Event) (outcome string, e *lin.OpError, off *int64, replace bool) {
	t := time.NewTimer(confluentMessageTimeout + 10*time.Second)
	defer t.Stop()
	select {
	case ev := <-dr:
		m, ok := ev.(*kafka.Message)
		if !ok {
			return lin.OutcomeUnknown, &lin.OpError{Code: "client", Message: fmt.Sprintf("unexpected delivery event %T: %v", ev, ev)}, nil, true
		}
		if m.TopicPartition.Error != nil {
			return lin.OutcomeUnknown, confluentOpError(m.TopicPartition.Error), nil, false
		}
		return lin.OutcomeOK, nil, lin.Int64(int64(m.TopicPartition.Offset)), false
	case <-t.C:
		return lin.OutcomeUnknown, &lin.OpError{Code: "client", Message: "no delivery report within the message timeout"}, nil, true
	}
}

// confluentOpError names a librdkafka error by Kafka's name where it is a
// broker error, else by librdkafka's local name.
func confluentOpError(err error) *lin.OpError {
	var ke kafka.Error
	if errors.As(err, &ke) {
		return &lin.OpError{Code: ke.Code().String(), Message: ke.Error()}
	}
	return &lin.OpError{Code: "client", Message: err.Error()}
}
