package proxy

import "time"

// TimeoutToxic stops all data of a direction and, after Timeout
// milliseconds, closes the connection, as toxiproxy's timeout toxic. With
// Timeout 0 the connection stays open and data is dropped until the toxic is
// removed (a blackhole).
type TimeoutToxic struct {
	Timeout int64 `json:"timeout"`
}

func init() { Register("timeout", func() any { return new(TimeoutToxic) }) }

// Pipe implements Toxic: data is dropped, and the end of the stream too.
func (t *TimeoutToxic) Pipe(s *Stub, c Chunk) error { return nil }

// Attach implements Attacher: the timer runs from when the toxic applies to
// the connection, traffic or not.
func (t *TimeoutToxic) Attach(s *Stub) {
	if t.Timeout <= 0 {
		return
	}
	go func() {
		if s.Expire(time.Duration(t.Timeout) * time.Millisecond) {
			s.Close()
		}
	}()
}
