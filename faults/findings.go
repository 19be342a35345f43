package faults

import (
	"fmt"
	"strings"

	lin "github.com/cascade-kafka/cascade/linearizability"
)

// StaleCommitFindings renders, for a run's findings.md, every committed
// offset read lower than one read before it and shown again after
// (linearizability's stale_commit_read): a group coordinator answering
// OffsetFetch from state that trails what it acknowledged, as Apache
// Kafka's does for a few seconds after its __consumer_offsets partition
// changes leader. Each finding lists the three reads with their times on
// the history's clock. It is information, not a failure; it returns ""
// when the run has none.
func StaleCommitFindings(h []lin.Op, rep *lin.Report) string {
	var b strings.Builder
	n := 0
	for _, a := range rep.Info {
		if a.Kind != lin.KindStaleCommitRead {
			continue
		}
		if n == 0 {
			b.WriteString("## Stale committed-offset reads\n\n" +
				"OffsetFetch answered an offset older than one already committed and read back, then the newer one again. " +
				"A consumer that resumes in that window reads some records twice; none is lost.\n\n")
		}
		n++
		fmt.Fprintf(&b, "- %s: %s\n", a.Key, a.Detail)
		for _, i := range a.Ops {
			if i < 0 || i >= len(h) {
				continue
			}
			o := &h[i]
			off := int64(-1)
			if o.Offset != nil {
				off = *o.Offset
			}
			fmt.Fprintf(&b, "  - line %d: %s %s %s offset %d, called %.3f s, returned %.3f s\n",
				i+1, o.Client, o.Op, o.Outcome, off, float64(o.CallNs)/1e9, float64(o.ReturnNs)/1e9)
		}
	}
	return b.String()
}
