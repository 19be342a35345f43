package proxy

// LimitDataToxic closes the connection once Bytes bytes have passed in its
// direction, as toxiproxy's limit_data toxic; the last chunk is cut at the
// limit.
type LimitDataToxic struct {
	Bytes int64 `json:"bytes"`
}

type limitState struct{ passed int64 }

func init() { Register("limit_data", func() any { return new(LimitDataToxic) }) }

// NewState implements Stateful: the count is per connection.
func (t *LimitDataToxic) NewState() any { return new(limitState) }

// Pipe implements Toxic.
func (t *LimitDataToxic) Pipe(s *Stub, c Chunk) error {
	st := s.State.(*limitState)
	if c.EOF {
		return s.Next(c)
	}
	left := t.Bytes - st.passed
	if int64(len(c.Data)) < left {
		st.passed += int64(len(c.Data))
		return s.Next(c)
	}
	if left > 0 {
		st.passed += left
		if err := s.Next(c.Split(0, int(left))); err != nil {
			return err
		}
	}
	return ErrClose
}
