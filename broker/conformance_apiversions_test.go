package broker_test

import (
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/wire"
)

// TestConformanceApiVersions compares Cascade's ApiVersions answer with
// Apache Kafka's: every range Cascade advertises must lie within Kafka's and
// reach Kafka's ceiling (Cascade's aim is Kafka 4.4's ceilings), and every
// feature Cascade finalizes must be one Kafka supports at that level. Other
// differences (floors Cascade keeps lower for old clients) are logged.
func TestConformanceApiVersions(t *testing.T) {
	p := newPair(t)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(4)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "conformance", "1"
	kr, cr := p.both(req)
	k, c := kr.(*kmsg.ApiVersionsResponse), cr.(*kmsg.ApiVersionsResponse)
	if k.ErrorCode != 0 || c.ErrorCode != 0 {
		t.Fatalf("error codes kafka %d cascade %d", k.ErrorCode, c.ErrorCode)
	}
	kafka := map[int16]kmsg.ApiVersionsResponseApiKey{}
	for _, a := range k.ApiKeys {
		kafka[a.ApiKey] = a
	}
	for _, a := range c.ApiKeys {
		ka, ok := kafka[a.ApiKey]
		switch {
		case !ok:
			t.Errorf("%s: Cascade advertises %d-%d, Kafka does not serve it", kmsg.NameForKey(a.ApiKey), a.MinVersion, a.MaxVersion)
		case a.MinVersion < ka.MinVersion || a.MaxVersion > ka.MaxVersion:
			t.Errorf("%s: Cascade %d-%d outside Kafka's %d-%d", kmsg.NameForKey(a.ApiKey), a.MinVersion, a.MaxVersion, ka.MinVersion, ka.MaxVersion)
		case a.MaxVersion < ka.MaxVersion:
			t.Errorf("%s: Cascade's ceiling %d is below Kafka's %d", kmsg.NameForKey(a.ApiKey), a.MaxVersion, ka.MaxVersion)
		case a.MinVersion != ka.MinVersion || a.MaxVersion != ka.MaxVersion:
			t.Logf("%s: Cascade %d-%d, Kafka %d-%d", kmsg.NameForKey(a.ApiKey), a.MinVersion, a.MaxVersion, ka.MinVersion, ka.MaxVersion)
		}
	}
	supported := map[string]kmsg.ApiVersionsResponseSupportedFeature{}
	for _, f := range k.SupportedFeatures {
		supported[f.Name] = f
	}
	for _, f := range c.SupportedFeatures {
		kf, ok := supported[f.Name]
		if !ok || f.MinVersion < kf.MinVersion || f.MaxVersion > kf.MaxVersion {
			t.Errorf("feature %s: Cascade supports %d-%d, Kafka %d-%d", f.Name, f.MinVersion, f.MaxVersion, kf.MinVersion, kf.MaxVersion)
		}
	}
	kfin := map[string]int16{}
	for _, f := range k.FinalizedFeatures {
		kfin[f.Name] = f.MaxVersionLevel
	}
	cfin := map[string]int16{}
	for _, f := range c.FinalizedFeatures {
		cfin[f.Name] = f.MaxVersionLevel
	}
	// group.version is the one feature Cascade finalizes, at Kafka's level.
	if cfin["group.version"] != kfin["group.version"] {
		t.Errorf("group.version: Cascade %d, Kafka %d", cfin["group.version"], kfin["group.version"])
	}
	for name, level := range kfin {
		if cfin[name] != level {
			t.Logf("feature %s: Kafka finalizes %d, Cascade %d", name, level, cfin[name])
		}
	}
	if c.FinalizedFeaturesEpoch < 0 {
		t.Errorf("finalized features epoch %d", c.FinalizedFeaturesEpoch)
	}

	// KIP-511: a version neither knows is answered in v0 format with
	// UNSUPPORTED_VERSION and ApiVersions' own range. A newer client sends
	// the newest header it knows (v2, with tags).
	frame := wire.AppendRequestHeader(nil, wire.RequestHeader{Key: 18, Version: 99, CorrelationID: 7, Flexible: true})
	frame = append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...)
	for name, rc := range map[string]*rawConn{"kafka": p.kafka, "cascade": p.cascade} {
		rc.c.Write(frame)
		resp, err := wire.ReadFrame(rc.c, 1<<20)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		v0 := kmsg.NewPtrApiVersionsResponse()
		v0.SetVersion(0)
		if err := v0.ReadFrom(resp[4:]); err != nil || v0.ErrorCode != 35 || len(v0.ApiKeys) != 1 || v0.ApiKeys[0].ApiKey != 18 {
			t.Errorf("%s: unsupported version answer %+v, %v", name, v0, err)
		}
	}
}
