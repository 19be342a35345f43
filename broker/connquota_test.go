package broker_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// TestRawConnectionQuotas starts a broker with max.connections.per.ip=0 and
// an override of 2 for 127.0.0.1, as Kafka allows, and checks that two
// connections are served and a third is closed at once.
func TestRawConnectionQuotas(t *testing.T) {
	b := brokertest.Start(t, map[string]string{
		"max.connections.per.ip":           "0",
		"max.connections.per.ip.overrides": "127.0.0.1:2",
	})
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "raw", "1"
	for range 2 {
		if resp := dial(t, b).do(av).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions: %d", resp.ErrorCode)
		}
	}
	if !dial(t, b).closed() {
		t.Fatal("a third connection from 127.0.0.1 stayed open")
	}
}
