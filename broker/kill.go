package broker

import "errors"

// Kill stops the broker as abruptly as a stop from inside its process can,
// for tests that run several nodes in one process and need a crash rather
// than a clean stop. Compared with Close:
//
//   - No controlled shutdown: the broker does not ask the active controller
//     to move its leaderships, and an active controller does not hand the
//     quorum leadership over; the others notice through missed heartbeats
//     and election timeouts, as after a SIGKILL.
//   - The client and controller listeners and every connection on them
//     close at once; peers see their connections end.
//   - Every log's files are closed without a flush, the recovery-point and
//     log-start checkpoints or the clean-shutdown marker
//     (log.Manager.Abandon), so the next start recovers the log dirs from
//     their recovery points as after a crash, and its registration is
//     unclean (no previous broker epoch).
//
// What a real SIGKILL does that Kill does not: goroutines are not stopped
// mid-instruction. A request being handled runs to its end (its answer
// fails to be written), background loops stop at their next select, and
// the metadata quorum's storage finishes the write in hand; so Kill never
// leaves a half-written batch or a torn Raft entry, which only a process
// kill (cmd/cascade processes, matrix/cascadecluster) or a power loss can.
// Writes already made stay in the page cache, as with SIGKILL.
//
// Kill and Close are each safe to call more than once, and the first of
// the two to run decides how the broker stops.
func (b *Broker) Kill() error {
	b.closeOnce.Do(func() {
		b.killed = true
		b.closeErr = b.shutdown()
		b.logger.Info("cascade broker killed")
	})
	return b.closeErr
}

// abandon leaves every log dir as a killed process would.
func (d *logDirs) abandon() error {
	var errs []error
	for _, m := range d.mgrs {
		errs = append(errs, m.Abandon())
	}
	return errors.Join(errs...)
}
