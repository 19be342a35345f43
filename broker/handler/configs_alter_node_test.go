package handler

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/config"
)

// TestCheckNodeNameWithoutConfig checks that an Env without a broker
// Config refuses every named node (node id -1, Kafka's node.id default)
// instead of dereferencing the missing Config, and that a configured node
// accepts only its own id.
func TestCheckNodeNameWithoutConfig(t *testing.T) {
	for _, typ := range []kmsg.ConfigResourceType{kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger} {
		for _, name := range []string{"0", "1", "-1"} {
			code, msg := checkNodeName(&Env{}, typ, name)
			if code != kerr.InvalidRequest.Code || msg == nil {
				t.Errorf("%s %q without Config: code %d msg %v, want INVALID_REQUEST with a message", typ, name, code, msg)
			}
		}
	}
	env := &Env{Config: &config.Broker{NodeID: 3}}
	if code, _ := checkNodeName(env, kmsg.ConfigResourceTypeBroker, "3"); code != 0 {
		t.Errorf("own node id refused with %d", code)
	}
	if code, msg := checkNodeName(env, kmsg.ConfigResourceTypeBrokerLogger, "4"); code != kerr.InvalidRequest.Code || *msg != "Unexpected node id. Expected 3, but received 4" {
		t.Errorf("other node id: %d %v", code, *msg)
	}
}
