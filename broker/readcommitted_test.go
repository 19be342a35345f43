package broker_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// TestReadCommittedSkipsAborted checks the Fetch side of transactions: a
// read_committed consumer gets the aborted-transaction list and drops the
// aborted records, a read_uncommitted one sees everything.
func TestReadCommittedSkipsAborted(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"})
	createTopic(t, b, "rc", 1)
	cl := b.Client(t, fastMeta, kgo.TransactionalID("rc-tx"), kgo.DefaultProduceTopic("rc"), kgo.TransactionTimeout(10*time.Second))
	ctx := ctxT(t)
	for i, commit := range []bool{false, true, false} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte('a' + i)}}, &kgo.Record{Value: []byte{byte('A' + i)}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	// A plain record after the transactions marks the end.
	plain := b.Client(t, fastMeta, kgo.DefaultProduceTopic("rc"))
	if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte("end")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	committed := consume(t, b, "rc", 3, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var got []string
	for _, r := range committed {
		got = append(got, string(r.Value))
	}
	if len(got) != 3 || got[0] != "b" || got[1] != "B" || got[2] != "end" {
		t.Fatalf("read_committed saw %q, want [b B end]", got)
	}
	all := consume(t, b, "rc", 7)
	if len(all) != 7 {
		t.Fatalf("read_uncommitted saw %d records, want 7", len(all))
	}
}
