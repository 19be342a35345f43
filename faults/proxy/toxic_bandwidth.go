package proxy

import (
	"errors"
	"time"
)

// BandwidthToxic limits a direction to Rate KB/s, as toxiproxy's bandwidth
// toxic: data is written in pieces of at most 100 ms worth, each followed
// by the time it takes at that rate.
type BandwidthToxic struct {
	Rate int64 `json:"rate"`
}

func init() { Register("bandwidth", func() any { return new(BandwidthToxic) }) }

func (t *BandwidthToxic) validate() error {
	if t.Rate <= 0 {
		return errors.New("bandwidth rate must be positive (KB/s)")
	}
	return nil
}

// Pipe implements Toxic.
func (t *BandwidthToxic) Pipe(s *Stub, c Chunk) error {
	if c.EOF {
		return s.Next(c)
	}
	piece := int(t.Rate * 100) // bytes per 100 ms
	for i := 0; i < len(c.Data); i += piece {
		j := min(i+piece, len(c.Data))
		if err := s.Next(c.Split(i, j)); err != nil {
			return err
		}
		if !s.Sleep(time.Duration(j-i) * time.Millisecond / time.Duration(t.Rate)) {
			return ErrClose
		}
	}
	return nil
}
