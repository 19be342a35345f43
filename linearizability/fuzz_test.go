package linearizability

import (
	"bytes"
	"testing"
	"time"
)

func FuzzReadCheck(f *testing.F) {
	var b bytes.Buffer
	if err := Write(&b, generate(genConfig{seed: 1, ops: 40, partitions: 2, clients: 3, txnClients: 1, unknownRate: 0.1})); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	f.Add([]byte(`{"client":"a","op":"fetch","topic":"t","partition":0,"from":5,"records":[{"offset":1,"value":"x"}],"call_ns":1,"return_ns":2,"outcome":"ok"}`))
	// Markers read off a fetch's next, under both isolation levels.
	f.Add([]byte(`{"client":"a","op":"produce","topic":"t","partition":0,"value":"v0","txn":"a-tx-0","call_ns":0,"return_ns":10,"outcome":"ok","offset":0}
{"client":"c","op":"fetch","topic":"t","partition":0,"from":0,"next":3,"isolation":"read_uncommitted","records":[{"offset":0,"value":"v0"}],"high_watermark":3,"call_ns":20,"return_ns":30,"outcome":"ok"}
{"client":"d","op":"fetch","topic":"t","partition":0,"from":0,"next":3,"isolation":"read_committed","high_watermark":3,"call_ns":20,"return_ns":30,"outcome":"ok"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		if _, err := Check(h, Options{Timeout: 100 * time.Millisecond}); err != nil {
			return
		}
	})
}
