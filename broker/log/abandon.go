package log

// Abandon stops the background work and closes every log's files without
// a flush, the checkpoints or the clean-shutdown marker, and releases the
// dir's lock: the dir is left as a killed process leaves it, and the next
// Open recovers each log from its recovery point. Writes already made stay
// in the kernel's page cache, as they do when a process is killed; only a
// power loss would drop what was not fsynced, which Abandon does not
// simulate. It is safe to call after Close, and Close after it does
// nothing.
func (m *Manager) Abandon() error {
	if !m.stopBackground() {
		return nil
	}
	err := m.closeLogs(false)
	m.deletes.Wait()
	if cerr := m.lock.Close(); err == nil {
		err = cerr
	}
	return err
}

// stopBackground marks the manager closed and waits for its background
// work (checkpoints, retention, the flusher) to stop; false when it was
// closed already.
func (m *Manager) stopBackground() bool {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return false
	}
	m.closed = true
	m.mu.Unlock()
	close(m.stop)
	close(m.flusher.stop)
	m.flusher.done.Wait()
	m.wg.Wait()
	return true
}
