package confluent

import (
	"errors"
	"testing"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

func TestErrNames(t *testing.T) {
	for _, tc := range []struct {
		in   kafka.Error
		want string
	}{
		{kafka.NewError(kafka.ErrTopicAlreadyExists, "exists", false), "TOPIC_ALREADY_EXISTS"},
		{kafka.NewError(kafka.ErrMsgSizeTooLarge, "too large", false), "MESSAGE_TOO_LARGE"},
		{kafka.NewError(kafka.ErrUnknownTopic, "unknown", false), "CLIENT_UNKNOWN_TOPIC"},
		{kafka.NewError(kafka.ErrMsgTimedOut, "timed out", false), "CLIENT_TIMEOUT"},
		{kafka.NewError(kafka.ErrAutoOffsetReset, "fetch failed: Broker: Offset out of range", false), "OFFSET_OUT_OF_RANGE"},
		{kafka.NewError(kafka.ErrAutoOffsetReset, "no offset", false), "CLIENT_AUTO_OFFSET_RESET"},
	} {
		if got := errName(tc.in); got != tc.want {
			t.Errorf("errName(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if kafkaErr(kafka.NewError(kafka.ErrNoError, "", false)) != nil {
		t.Error("ErrNoError converted to an error")
	}
	if got := driver.Code(kafkaErr(errors.New("plain"))); got != "" {
		t.Errorf("plain error got code %q", got)
	}
}
