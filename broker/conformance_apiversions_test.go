package broker_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestConformanceApiVersionsDump(t *testing.T) {
	p := newPair(t)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(4)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "conformance", "1"
	k := p.kafka.do(req).(*kmsg.ApiVersionsResponse)
	c := p.cascade.do(req).(*kmsg.ApiVersionsResponse)
	cm := map[int16]kmsg.ApiVersionsResponseApiKey{}
	for _, a := range c.ApiKeys {
		cm[a.ApiKey] = a
	}
	for _, a := range k.ApiKeys {
		ca, ok := cm[a.ApiKey]
		t.Logf("%2d %-30s kafka %d-%d cascade %v %d-%d", a.ApiKey, kmsg.NameForKey(a.ApiKey), a.MinVersion, a.MaxVersion, ok, ca.MinVersion, ca.MaxVersion)
	}
	t.Logf("kafka supported features %+v", k.SupportedFeatures)
	t.Logf("kafka finalized features %+v epoch %d", k.FinalizedFeatures, k.FinalizedFeaturesEpoch)
}
