package franzgo

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

func TestKafkaErrNames(t *testing.T) {
	for _, tc := range []struct {
		in   error
		want string
	}{
		{kerr.TopicAlreadyExists, "TOPIC_ALREADY_EXISTS"},
		{fmt.Errorf("wrapped: %w", kerr.MessageTooLarge), "MESSAGE_TOO_LARGE"},
		{kgo.ErrRecordTimeout, "CLIENT_TIMEOUT"},
		{errors.New("plain"), ""},
	} {
		if got := driver.Code(kafkaErr(tc.in)); got != tc.want {
			t.Errorf("kafkaErr(%v) code %q, want %q", tc.in, got, tc.want)
		}
	}
	if kafkaErr(nil) != nil {
		t.Error("kafkaErr(nil) != nil")
	}
	if got := driver.Code(codeErr(3, nil)); got != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("codeErr(3) = %q", got)
	}
}

func TestProduceValidatesOptions(t *testing.T) {
	d, err := Open(context.Background(), "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	for name, req := range map[string]driver.Produce{
		"bad acks":  {Topic: "t", Acks: 2},
		"bad codec": {Topic: "t", Acks: -1, Codec: "brotli"},
	} {
		if _, err := d.Produce(ctx, req); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	for name, req := range map[string]driver.Produce{
		"idempotence with acks=1":   {Topic: "t", Acks: 1, Idempotent: true},
		"idempotence with 3 flight": {Topic: "t", Acks: -1, Idempotent: true, MaxInFlight: 3},
	} {
		if _, err := d.Produce(ctx, req); !errors.Is(err, driver.ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", name, err)
		}
	}
	if _, err := d.GroupConsume(ctx, driver.GroupConsume{Group: "g", Topic: "t", Assignor: "magic"}); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("unknown assignor: %v, want ErrUnsupported", err)
	}
}
