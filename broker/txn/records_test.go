package txn

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
)

func TestKeyRoundTrip(t *testing.T) {
	k := EncodeKey("my-txn")
	if want, _ := hex.DecodeString("000000066d792d74786e"); !bytes.Equal(k, want) {
		t.Fatalf("key = %x, want %x", k, want)
	}
	id, err := DecodeKey(k)
	if err != nil || id != "my-txn" {
		t.Fatalf("DecodeKey = %q, %v", id, err)
	}
	for _, bad := range []string{"", "00", "0001000161", "0000000561", "000000016162"} {
		b, _ := hex.DecodeString(bad)
		if _, err := DecodeKey(b); !errors.Is(err, ErrBadRecord) {
			t.Errorf("DecodeKey(%s) = %v, want ErrBadRecord", bad, err)
		}
	}
}

// TestValueV0Bytes checks the exact bytes Kafka's TransactionLogValue v0
// serialiser produces for an ongoing transaction.
func TestValueV0Bytes(t *testing.T) {
	v := Value{ProducerID: 1000, PreviousProducerID: -1, NextProducerID: -1, NextProducerEpoch: -1,
		ProducerEpoch: 3, TimeoutMs: 60000, State: Ongoing,
		Partitions:   []TopicPartition{{"b", 1}, {"a", 2}, {"a", 0}},
		LastUpdateMs: 20, StartMs: 10}
	got, err := EncodeValue(v)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := hex.DecodeString("0000" + // version
		"00000000000003e8" + // producer id
		"0003" + // epoch
		"0000ea60" + // timeout
		"01" + // Ongoing
		"00000002" + // two topics
		"000161" + "00000002" + "00000000" + "00000002" + // a: [0 2]
		"000162" + "00000001" + "00000001" + // b: [1]
		"0000000000000014" + "000000000000000a")
	if !bytes.Equal(got, want) {
		t.Fatalf("value =\n%x\nwant\n%x", got, want)
	}
	back, err := DecodeValue(got)
	if err != nil {
		t.Fatal(err)
	}
	sortPartitions(v.Partitions)
	if !reflect.DeepEqual(back, v) {
		t.Fatalf("round trip = %+v, want %+v", back, v)
	}
}

func TestValueRoundTrip(t *testing.T) {
	for _, v := range []Value{
		{Version: 0, ProducerID: 7, PreviousProducerID: -1, NextProducerID: -1, NextProducerEpoch: -1,
			ProducerEpoch: 0, TimeoutMs: 1, State: Empty, LastUpdateMs: 5, StartMs: -1},
		{Version: 1, ProducerID: 7, PreviousProducerID: -1, NextProducerID: -1, NextProducerEpoch: -1,
			ProducerEpoch: 0, TimeoutMs: 1, State: Empty, LastUpdateMs: 5, StartMs: -1},
		{Version: 1, ProducerID: 9, PreviousProducerID: 8, NextProducerID: 10, NextProducerEpoch: 2,
			ClientTransactionVersion: 2, ProducerEpoch: 4, TimeoutMs: 900000, State: PrepareCommit,
			Partitions: []TopicPartition{{"t", 0}, {"t", 1}, {"u", 7}}, LastUpdateMs: 99, StartMs: 98},
		{Version: 1, ProducerID: 9, PreviousProducerID: -1, NextProducerID: -1, NextProducerEpoch: -1,
			ProducerEpoch: 4, TimeoutMs: 900000, State: CompleteAbort, Partitions: nil, LastUpdateMs: 99, StartMs: 98},
	} {
		b, err := EncodeValue(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeValue(b)
		if err != nil {
			t.Fatalf("%+v: %v", v, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("round trip = %+v, want %+v", got, v)
		}
	}
}

// TestValueV1Bytes checks the flexible encoding: compact arrays and
// strings, per-struct and top-level tagged fields.
func TestValueV1Bytes(t *testing.T) {
	v := Value{Version: 1, ProducerID: 1, PreviousProducerID: -1, NextProducerID: 2, NextProducerEpoch: -1,
		ProducerEpoch: 0, TimeoutMs: 1000, State: Ongoing, Partitions: []TopicPartition{{"a", 0}},
		LastUpdateMs: 0, StartMs: 0}
	got, err := EncodeValue(v)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := hex.DecodeString("0001" + "0000000000000001" + "0000" + "000003e8" + "01" +
		"02" + "0261" + "02" + "00000000" + "00" +
		"0000000000000000" + "0000000000000000" +
		"01" + "01" + "08" + "0000000000000002")
	if !bytes.Equal(got, want) {
		t.Fatalf("value =\n%x\nwant\n%x", got, want)
	}
}

func TestDecodeValueRejects(t *testing.T) {
	good, _ := EncodeValue(Value{ProducerID: 1, State: Ongoing, Partitions: []TopicPartition{{"a", 0}},
		PreviousProducerID: -1, NextProducerID: -1, NextProducerEpoch: -1})
	for i := 0; i < len(good); i++ {
		if _, err := DecodeValue(good[:i]); !errors.Is(err, ErrBadRecord) {
			t.Errorf("truncated at %d: %v", i, err)
		}
	}
	if _, err := DecodeValue(append(good, 0)); !errors.Is(err, ErrBadRecord) {
		t.Errorf("trailing byte: %v", err)
	}
	bad := append([]byte(nil), good...)
	bad[1] = 9 // version
	if _, err := DecodeValue(bad); !errors.Is(err, ErrBadRecord) {
		t.Errorf("version 9: %v", err)
	}
	bad = append([]byte(nil), good...)
	bad[16] = 42 // status
	if _, err := DecodeValue(bad); !errors.Is(err, ErrBadRecord) {
		t.Errorf("status 42: %v", err)
	}
	// A topic count far beyond the record's size must not allocate.
	bad = append([]byte(nil), good[:17]...)
	bad = append(bad, 0x7f, 0xff, 0xff, 0xff)
	if _, err := DecodeValue(bad); !errors.Is(err, ErrBadRecord) {
		t.Errorf("huge array: %v", err)
	}
}

func FuzzDecodeValue(f *testing.F) {
	for _, v := range []Value{
		{Version: 0, State: Ongoing, Partitions: []TopicPartition{{"a", 1}}, PreviousProducerID: -1, NextProducerID: -1, NextProducerEpoch: -1},
		{Version: 1, State: PrepareAbort, Partitions: []TopicPartition{{"a", 1}}, PreviousProducerID: 3, NextProducerID: -1, NextProducerEpoch: -1},
	} {
		b, _ := EncodeValue(v)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeValue(b)
		if err != nil {
			return
		}
		// Whatever decodes must re-encode and decode to the same value.
		if v.State == Empty {
			v.Partitions = nil
		}
		again, err := EncodeValue(v)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", v, err)
		}
		back, err := DecodeValue(again)
		if err != nil || !reflect.DeepEqual(back, v) {
			t.Fatalf("re-decode = %+v, %v; want %+v", back, err, v)
		}
	})
}

// TestPartitionFor checks Java's String.hashCode placement: "a".hashCode()
// is 97; "polygenelubricants".hashCode() is MinInt32, which Kafka's
// Utils.abs maps to 0.
func TestPartitionFor(t *testing.T) {
	for _, c := range []struct {
		key  string
		n    int32
		want int32
	}{
		{"a", 50, 97 % 50},
		{"ab", 50, (97*31 + 98) % 50},
		{"polygenelubricants", 50, 0},
		{"", 50, 0},
		{"my-transactional-id", 50, 959806496 % 50}, // hashCode -959806496
	} {
		if got := PartitionFor(c.key, c.n); got != c.want {
			t.Errorf("PartitionFor(%q) = %d, want %d", c.key, got, c.want)
		}
	}
}
