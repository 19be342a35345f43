package handler

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafka44Ranges are the ranges Apache Kafka 4.4.0 advertises for the APIs a
// client may send (TestConformanceApiVersions in package broker checks this
// table against a running Kafka).
var kafka44Ranges = map[int16][2]int16{
	0: {0, 13}, 1: {4, 18}, 2: {1, 11}, 3: {0, 13}, 8: {2, 10}, 9: {1, 10}, 10: {0, 6},
	11: {0, 9}, 12: {0, 4}, 13: {0, 5}, 14: {0, 5}, 15: {0, 6}, 16: {0, 5}, 17: {0, 1},
	18: {0, 5}, 19: {2, 7}, 20: {1, 6}, 21: {0, 2}, 22: {0, 5}, 23: {2, 4}, 24: {0, 5},
	25: {0, 4}, 26: {0, 5}, 27: {1, 2}, 28: {0, 6}, 29: {1, 3}, 30: {1, 3}, 31: {1, 3},
	32: {1, 4}, 33: {0, 2}, 34: {1, 2}, 35: {1, 5}, 36: {0, 2}, 37: {0, 3}, 38: {1, 3},
	39: {1, 2}, 40: {1, 2}, 41: {1, 3}, 42: {0, 3}, 43: {0, 2}, 44: {0, 1}, 45: {0, 1},
	46: {0, 0}, 47: {0, 0}, 48: {0, 1}, 49: {0, 1}, 50: {0, 0}, 51: {0, 0}, 55: {0, 2},
	57: {0, 2}, 60: {0, 2}, 61: {0, 0}, 64: {0, 0}, 65: {0, 0}, 66: {0, 2}, 68: {0, 1},
	69: {0, 1}, 74: {0, 1}, 75: {0, 0}, 76: {1, 1}, 77: {1, 1}, 78: {1, 2}, 79: {1, 2},
	80: {0, 1}, 81: {0, 0}, 83: {0, 0}, 84: {0, 0}, 85: {0, 1}, 86: {0, 0}, 87: {0, 1},
	88: {0, 1}, 89: {0, 1}, 90: {0, 1}, 91: {0, 0}, 92: {0, 0}, 93: {0, 0}, 94: {0, 0},
}

// TestRegistryWithinKafka checks that every advertised range lies within
// Apache Kafka 4.4's: Cascade never offers a version Kafka has removed
// (KIP-896) or not yet defined.
func TestRegistryWithinKafka(t *testing.T) {
	for _, a := range APIs() {
		k, ok := kafka44Ranges[a.Key]
		if !ok {
			t.Errorf("%s (%d) is not a client API of Kafka 4.4", kmsg.NameForKey(a.Key), a.Key)
			continue
		}
		if a.Min < k[0] || a.Max > k[1] {
			t.Errorf("%s: Cascade %d-%d outside Kafka 4.4's %d-%d", kmsg.NameForKey(a.Key), a.Min, a.Max, k[0], k[1])
		}
	}
}

// TestApiVersionsFeatures checks the advertised features against what the
// registry implements: a finalized level must have its protocol served.
func TestApiVersionsFeatures(t *testing.T) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	resp, err := handleApiVersions(context.Background(), &Env{}, &Request{Key: 18, Version: 3, Msg: req})
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if r.FinalizedFeaturesEpoch < 0 {
		t.Fatalf("finalized features epoch %d: the Java client ignores features below 0", r.FinalizedFeaturesEpoch)
	}
	finalized := map[string]int16{}
	for _, f := range r.FinalizedFeatures {
		if f.MinVersionLevel != f.MaxVersionLevel {
			t.Errorf("%s finalized %d-%d", f.Name, f.MinVersionLevel, f.MaxVersionLevel)
		}
		finalized[f.Name] = f.MaxVersionLevel
	}
	supported := map[string][2]int16{}
	for _, f := range r.SupportedFeatures {
		supported[f.Name] = [2]int16{f.MinVersion, f.MaxVersion}
	}
	for name, level := range finalized {
		if s, ok := supported[name]; !ok || level < s[0] || level > s[1] {
			t.Errorf("%s finalized at %d outside supported %v", name, level, s)
		}
	}
	served := func(key, version int16) bool { _, ok := Lookup(key, version); return ok }
	// KIP-848: group.version 1 means the consumer group protocol.
	if finalized["group.version"] != 1 || !served(68, 0) || !served(69, 0) {
		t.Errorf("group.version %d with ConsumerGroupHeartbeat %v", finalized["group.version"], served(68, 0))
	}
	// KIP-890 part 2: transaction.version 2 needs EndTxn v5, TxnOffsetCommit
	// v5 and AddPartitionsToTxn by Produce v12.
	tv2 := served(26, 5) && served(28, 5) && served(0, 12)
	if finalized["transaction.version"] >= 2 && !tv2 {
		t.Errorf("transaction.version %d finalized without the transactions v2 protocol", finalized["transaction.version"])
	}
	if s := supported["transaction.version"]; s[1] >= 2 && !tv2 {
		t.Errorf("transaction.version supported up to %d without the transactions v2 protocol", s[1])
	}
	// v0-2 carry no features.
	req.SetVersion(2)
	resp, _ = handleApiVersions(context.Background(), &Env{}, &Request{Key: 18, Version: 2, Msg: req})
	if r := resp.(*kmsg.ApiVersionsResponse); len(r.SupportedFeatures)+len(r.FinalizedFeatures) != 0 {
		t.Error("features in a v2 response")
	}
}

// TestApiVersionsV5Identity checks the KIP-1242 checks of ApiVersions v5
// against a broker of node 3 with no cluster id (no metadata store): only
// one of ClusterID and NodeID set is INVALID_REQUEST, a cluster or node
// that is not this one REBOOTSTRAP_REQUIRED, and both errors list no APIs.
// v4 ignores the fields. TestConformanceApiVersionsV5 in package broker
// holds the same cases against Kafka.
func TestApiVersionsV5Identity(t *testing.T) {
	env := &Env{NodeID: 3}
	for _, tc := range []struct {
		name    string
		version int16
		cluster *string
		node    int32
		want    int16
	}{
		{"bootstrapping", 5, nil, -1, 0},
		{"this broker", 5, kmsg.StringPtr(""), 3, 0},
		{"other cluster", 5, kmsg.StringPtr("other"), 3, kerr.RebootstrapRequired.Code},
		{"other node", 5, kmsg.StringPtr(""), 4, kerr.RebootstrapRequired.Code},
		{"cluster only", 5, kmsg.StringPtr(""), -1, kerr.InvalidRequest.Code},
		{"node only", 5, nil, 3, kerr.InvalidRequest.Code},
		{"v4 ignores them", 4, kmsg.StringPtr("other"), -1, 0},
	} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(tc.version)
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
		req.ClusterID, req.NodeID = tc.cluster, tc.node
		resp, err := handleApiVersions(context.Background(), env, &Request{Key: 18, Version: tc.version, Msg: req})
		if err != nil {
			t.Fatal(err)
		}
		r := resp.(*kmsg.ApiVersionsResponse)
		if r.ErrorCode != tc.want {
			t.Errorf("%s: error %d, want %d", tc.name, r.ErrorCode, tc.want)
		}
		if (r.ErrorCode == 0) != (len(r.ApiKeys) > 0) {
			t.Errorf("%s: error %d with %d APIs", tc.name, r.ErrorCode, len(r.ApiKeys))
		}
	}
}
