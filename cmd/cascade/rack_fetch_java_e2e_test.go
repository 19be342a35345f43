package main

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/cascade-kafka/cascade/matrix/clients/java"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

func init() {
	rackConsumers = append(rackConsumers, rackConsumer{name: "java", start: startDriverRackConsumer(java.Open),
		ensure: func(ctx context.Context) error {
			_, err := java.Ensure(ctx)
			return err
		}})
}

// startDriverRackConsumer reads through a matrix driver (the Java client's
// KafkaConsumer with client.rack): one consume command after another, each
// a new consumer assigned the partition from where the last stopped, so
// every command asks the leader again which replica to read from.
func startDriverRackConsumer(open driver.Opener) func(t *testing.T, seeds []string, topic, rack string, got func(string)) func() {
	return func(t *testing.T, seeds []string, topic, rack string, got func(string)) func() {
		ctx, cancel := context.WithCancel(context.Background())
		d, err := open(ctx, strings.Join(seeds, ","))
		if err != nil {
			cancel()
			t.Fatalf("starting the driver: %v", err)
		}
		var done sync.WaitGroup
		done.Go(func() {
			next := int64(-2)
			for ctx.Err() == nil {
				res, err := d.Consume(ctx, driver.Consume{Topic: topic, From: next, Count: 1000, TimeoutMs: 2000,
					Rack: rack, Reset: "earliest"})
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("%s consume: %v", d.Client(), err)
					}
					return
				}
				for _, r := range res.Records {
					got(string(r.Value))
					next = r.Offset + 1
				}
			}
		})
		return func() {
			cancel()
			done.Wait()
			d.Close()
		}
	}
}
