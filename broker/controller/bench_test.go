package controller

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/broker/metadata"
)

// benchCluster is three active brokers and one topic of n partitions with
// three replicas each.
func benchCluster(b *testing.B, n int32) *harness {
	h := newHarness(b)
	for id := int32(1); id <= 3; id++ {
		req := RegisterBrokerRequest{BrokerID: id, ClusterID: testClusterID, IncarnationID: incarnation(int64(id), 1),
			Features: []metadata.BrokerFeature{{Name: "metadata.version", MinSupportedVersion: 1, MaxSupportedVersion: metadata.MetadataVersion}}}
		recs, _, err := h.c.RegisterBroker(h.img, h.now, h.img.Offset+1, req)
		if err != nil {
			b.Fatal(err)
		}
		h.apply(b, recs)
		recs, _, err = h.c.BrokerHeartbeat(h.img, h.now, h.img.Offset+1, HeartbeatRequest{BrokerID: id, BrokerEpoch: h.epoch(id), CurrentMetadataOffset: h.img.Offset})
		if err != nil {
			b.Fatal(err)
		}
		h.apply(b, recs)
	}
	recs, res, err := h.c.CreateTopics(h.img, []metadata.CreateTopic{{Name: "t", NumPartitions: n, ReplicationFactor: 3}}, false)
	if err != nil || res[0].Err != nil {
		b.Fatal(err, res[0].Err)
	}
	h.apply(b, recs)
	return h
}

// BenchmarkFenceBroker measures fencing one of three brokers that is in
// every ISR and leads a third of the partitions.
func BenchmarkFenceBroker(b *testing.B) {
	for _, n := range []int32{100, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			h := benchCluster(b, n)
			b.ResetTimer()
			for range b.N {
				recs, err := h.c.BrokerGone(h.img, 2, -1)
				if err != nil || len(recs) != int(n)+1 {
					b.Fatal(len(recs), err)
				}
			}
		})
	}
}

// BenchmarkTick measures a Tick that finds nothing to do.
func BenchmarkTick(b *testing.B) {
	h := benchCluster(b, 10000)
	h.c.cfg.AutoLeaderRebalance = false
	r := rand.New(rand.NewSource(1))
	b.ResetTimer()
	for range b.N {
		if _, _, err := h.c.Tick(h.img, h.now.Add(time.Duration(r.Intn(1000))*time.Millisecond)); err != nil {
			b.Fatal(err)
		}
	}
}
