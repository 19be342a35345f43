package proxy

import (
	"errors"
	"time"
)

// SlicerToxic slices every chunk into pieces of AverageSize ± SizeVariation
// bytes with Delay microseconds between them, as toxiproxy's slicer toxic:
// it exercises a peer's handling of partial reads.
type SlicerToxic struct {
	AverageSize   int   `json:"average_size"`
	SizeVariation int   `json:"size_variation"`
	Delay         int64 `json:"delay"`
}

func init() { Register("slicer", func() any { return new(SlicerToxic) }) }

func (t *SlicerToxic) validate() error {
	if t.AverageSize <= 0 || t.SizeVariation < 0 || t.SizeVariation >= t.AverageSize {
		return errors.New("slicer needs average_size > size_variation >= 0")
	}
	return nil
}

// Pipe implements Toxic.
func (t *SlicerToxic) Pipe(s *Stub, c Chunk) error {
	if c.EOF {
		return s.Next(c)
	}
	for i := 0; i < len(c.Data); {
		n := t.AverageSize
		if t.SizeVariation > 0 {
			n += int(s.Rand.Int64N(int64(2*t.SizeVariation+1))) - t.SizeVariation
		}
		j := min(i+n, len(c.Data))
		if i > 0 && !s.Sleep(time.Duration(t.Delay)*time.Microsecond) {
			return ErrClose
		}
		if err := s.Next(c.Split(i, j)); err != nil {
			return err
		}
		i = j
	}
	return nil
}
