package config

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/log"
	"github.com/cascade-kafka/cascade/broker/record"
)

// appendAt appends one record with timestamp ts to a fresh log configured
// from the topic overrides, with the broker's clock at now.
func appendAt(t *testing.T, overrides map[string]string, now time.Time, ts int64) error {
	t.Helper()
	cfg, err := TopicLogConfig(Default(), overrides)
	if err != nil {
		t.Fatal(err)
	}
	m, err := log.Open(t.TempDir(), log.Options{Clock: func() time.Time { return now },
		RetentionCheckInterval: -1, CleanerBackoff: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	l, err := m.Create(log.TopicPartition{Topic: "t", Partition: 0}, [16]byte{1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := record.Build(record.NewSpec(record.Rec{Timestamp: ts, Key: []byte("k"), Value: []byte("v")}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.AppendFromClient(b, 0)
	return err
}

// TestTimestampBoundsFromTopicConfig checks that
// message.timestamp.{before,after}.max.ms reach the log: by default, as in
// Kafka 4, a record more than an hour ahead of the broker's clock is
// refused with the sentinel the produce handler maps to INVALID_TIMESTAMP.
func TestTimestampBoundsFromTopicConfig(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ms := now.UnixMilli()
	hour := time.Hour.Milliseconds()
	cases := []struct {
		overrides map[string]string
		ts        int64
		ok        bool
	}{
		{nil, ms + hour + 1, false},
		{nil, ms + hour, true},
		{nil, 0, true}, // before.max.ms is unlimited by default
		{map[string]string{"message.timestamp.after.max.ms": "0"}, ms + 1, false},
		{map[string]string{"message.timestamp.after.max.ms": "0"}, ms, true},
		{map[string]string{"message.timestamp.after.max.ms": "7200000"}, ms + hour + 1, true},
		{map[string]string{"message.timestamp.before.max.ms": "60000"}, ms - 60001, false},
		{map[string]string{"message.timestamp.before.max.ms": "60000"}, ms - 60000, true},
		{map[string]string{"message.timestamp.before.max.ms": "0"}, ms - 1, false},
		{map[string]string{"message.timestamp.type": "LogAppendTime"}, ms + 2*hour, true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.overrides, c.ts-ms), func(t *testing.T) {
			err := appendAt(t, c.overrides, now, c.ts)
			if c.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !c.ok && !errors.Is(err, log.ErrInvalidTimestamp) {
				t.Fatalf("got %v, want ErrInvalidTimestamp (INVALID_TIMESTAMP)", err)
			}
		})
	}
}
