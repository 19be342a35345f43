package proxy

import "time"

// SlowCloseToxic delays the close of a direction by Delay milliseconds after
// its sender closed, as toxiproxy's slow_close toxic.
type SlowCloseToxic struct {
	Delay int64 `json:"delay"`
}

func init() { Register("slow_close", func() any { return new(SlowCloseToxic) }) }

// Pipe implements Toxic.
func (t *SlowCloseToxic) Pipe(s *Stub, c Chunk) error {
	if c.EOF {
		s.Sleep(time.Duration(t.Delay) * time.Millisecond)
	}
	return s.Next(c)
}
