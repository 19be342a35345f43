package proxy

import "time"

// LatencyToxic delays every chunk by Latency ± Jitter milliseconds from when
// it was read, as toxiproxy's latency toxic: chunks keep their spacing, so
// throughput is not reduced.
type LatencyToxic struct {
	Latency int64 `json:"latency"`
	Jitter  int64 `json:"jitter"`
}

func init() { Register("latency", func() any { return new(LatencyToxic) }) }

// Pipe implements Toxic.
func (t *LatencyToxic) Pipe(s *Stub, c Chunk) error {
	d := t.Latency
	if t.Jitter > 0 {
		d += s.Rand.Int64N(2*t.Jitter+1) - t.Jitter
	}
	if !s.Sleep(time.Until(c.Time.Add(time.Duration(d) * time.Millisecond))) {
		return ErrClose
	}
	return s.Next(c)
}
