package sarama

import (
	"errors"
	"fmt"
	"testing"

	"github.com/IBM/sarama"

	"github.com/cascade-kafka/cascade/matrix/driver"
)

func TestKafkaErrNames(t *testing.T) {
	msg := "exists"
	for _, tc := range []struct {
		in   error
		want string
	}{
		{sarama.ErrTopicAlreadyExists, "TOPIC_ALREADY_EXISTS"},
		{&sarama.TopicError{Err: sarama.ErrInvalidConfig, ErrMsg: &msg}, "INVALID_CONFIG"},
		{&sarama.TopicPartitionError{Err: sarama.ErrInvalidPartitions}, "INVALID_PARTITIONS"},
		{fmt.Errorf("wrapped: %w", sarama.ErrOffsetOutOfRange), "OFFSET_OUT_OF_RANGE"},
		{sarama.ErrOutOfBrokers, "CLIENT_ERROR"},
		{errors.New("plain"), ""},
	} {
		if got := driver.Code(kafkaErr(tc.in)); got != tc.want {
			t.Errorf("kafkaErr(%v) code %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := codeName(sarama.KError(32000)); got != "UNKNOWN_CODE_32000" {
		t.Errorf("codeName(32000) = %q", got)
	}
}
