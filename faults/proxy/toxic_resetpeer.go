package proxy

import "time"

// ResetPeerToxic resets the connection with a TCP RST, immediately or after
// Timeout milliseconds, as toxiproxy's reset_peer toxic.
type ResetPeerToxic struct {
	Timeout int64 `json:"timeout"`
}

func init() { Register("reset_peer", func() any { return new(ResetPeerToxic) }) }

// Pipe implements Toxic: data flows until the reset.
func (t *ResetPeerToxic) Pipe(s *Stub, c Chunk) error { return s.Next(c) }

// Attach implements Attacher.
func (t *ResetPeerToxic) Attach(s *Stub) {
	go func() {
		if s.Expire(time.Duration(t.Timeout) * time.Millisecond) {
			s.Reset()
		}
	}()
}
