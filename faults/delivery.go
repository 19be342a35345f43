package faults

import (
	"fmt"
	"slices"
	"strings"

	lin "github.com/cascade-kafka/cascade/linearizability"
)

// Delivery is Kafka's own delivery rule applied to a run, as its system
// tests' ProduceConsumeValidateTest.validate_delivery does: every
// acknowledged record must be among the records consumed at the end, and
// with idempotent producers none may be consumed twice. Here the consumer
// is the drain, which reads every partition from the start after the
// faults.
type Delivery struct {
	// Acked counts the acknowledged records that must be readable: outside
	// transactions, or in a transaction whose commit was acknowledged.
	Acked int
	// Consumed counts the distinct values the drain read.
	Consumed int
	// Missing are acknowledged values the drain did not read; Duplicated
	// values it read at more than one offset.
	Missing, Duplicated []string
}

// Valid reports whether the rule holds.
func (d Delivery) Valid() bool { return len(d.Missing) == 0 && len(d.Duplicated) == 0 }

// String renders the rule's verdict with the first few values of each list.
func (d Delivery) String() string {
	return fmt.Sprintf("%d acknowledged, %d consumed by the drain; missing %d [%s], duplicated %d [%s]",
		d.Acked, d.Consumed, len(d.Missing), headList(d.Missing), len(d.Duplicated), headList(d.Duplicated))
}

// ValidateDelivery applies the delivery rule to a history whose drain
// (client "drain") read the topic to its end.
func ValidateDelivery(h []lin.Op) Delivery {
	committed := committedTxns(h)
	type at struct {
		p   int32
		off int64
	}
	read := map[string][]at{}
	for i := range h {
		o := &h[i]
		if o.Client != "drain" || o.Op != lin.OpFetch || o.Outcome != lin.OutcomeOK {
			continue
		}
		for _, r := range o.Records {
			a := at{o.Partition, r.Offset}
			if !slices.Contains(read[r.Value], a) {
				read[r.Value] = append(read[r.Value], a)
			}
		}
	}
	var d Delivery
	d.Consumed = len(read)
	for i := range h {
		o := &h[i]
		if o.Op != lin.OpProduce || o.Outcome != lin.OutcomeOK || (o.Txn != "" && !committed[o.Txn]) {
			continue
		}
		d.Acked++
		if len(read[o.Value]) == 0 {
			d.Missing = append(d.Missing, o.Value)
		}
	}
	for v, as := range read {
		if len(as) > 1 {
			d.Duplicated = append(d.Duplicated, fmt.Sprintf("%s×%d", v, len(as)))
		}
	}
	slices.Sort(d.Missing)
	slices.Sort(d.Duplicated)
	return d
}

// headList joins the first ten of s for a one-line summary.
func headList(s []string) string {
	if len(s) > 10 {
		return strings.Join(s[:10], " ") + " ..."
	}
	return strings.Join(s, " ")
}
