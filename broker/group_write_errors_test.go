package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// oversizedParts × oversizedMeta bytes of offset metadata make one
// OffsetCommit whose records exceed the default max.message.bytes of
// __consumer_offsets (1048588), while each partition's metadata stays under
// offset.metadata.max.bytes (4096).
const (
	oversizedParts = 300
	oversizedMeta  = 4000
)

// TestGroupCommitTooLarge commits, through kadm, offsets whose records
// cannot fit one __consumer_offsets batch. As Kafka's
// CoordinatorOperationExceptionHelper maps MESSAGE_TOO_LARGE, every
// partition is answered UNKNOWN_SERVER_ERROR at once, not a retriable error
// the client would retry until its deadline; a commit that fits still
// succeeds afterwards.
func TestGroupCommitTooLarge(t *testing.T) {
	b := brokertest.Start(t, map[string]string{"auto.create.topics.enable": "false"})
	oversizedCommit(t, b.Addr())
}

// TestGroupCommitTooLargeOracle runs the same scenario against Apache
// Kafka, which is the specification.
func TestGroupCommitTooLargeOracle(t *testing.T) {
	oversizedCommit(t, oracleAddr(t))
}

func oversizedCommit(t *testing.T, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), fastMeta)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topic := fmt.Sprintf("bigcommit-%d", time.Now().UnixNano()%1_000_000_000)
	group := topic + "-group"
	if _, err := adm.CreateTopic(ctx, oversizedParts, 1, nil, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	waitFor(ctx, t, "every partition led", func() (bool, string) {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		d := td[topic]
		n := 0
		for _, p := range d.Partitions {
			if p.Leader >= 0 && p.Err == nil {
				n++
			}
		}
		return n == oversizedParts, fmt.Sprintf("%d partitions led (%v)", n, d.Err)
	})

	meta := strings.Repeat("m", oversizedMeta)
	big := kadm.Offsets{}
	for p := int32(0); p < oversizedParts; p++ {
		big.Add(kadm.Offset{Topic: topic, Partition: p, At: 7, LeaderEpoch: -1, Metadata: meta})
	}
	start := time.Now()
	resps, err := adm.CommitOffsets(ctx, group, big)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("commit after %v: %v", took, err)
	}
	if took > 5*time.Second {
		t.Errorf("oversized commit answered after %v; want an immediate answer", took)
	}
	n := 0
	resps.Each(func(r kadm.OffsetResponse) {
		n++
		if !errors.Is(r.Err, kerr.UnknownServerError) && n < 5 {
			t.Errorf("%s-%d: %v, want UNKNOWN_SERVER_ERROR", r.Topic, r.Partition, r.Err)
		}
	})
	if n != oversizedParts {
		t.Errorf("%d partitions answered, want %d", n, oversizedParts)
	}

	small := kadm.Offsets{}
	small.Add(kadm.Offset{Topic: topic, Partition: 0, At: 5, LeaderEpoch: -1, Metadata: "ok"})
	if err := adm.CommitAllOffsets(ctx, group, small); err != nil {
		t.Fatalf("small commit: %v", err)
	}
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if err := fetched.Error(); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	got := map[int32]int64{}
	fetched.Each(func(r kadm.OffsetResponse) { got[r.Partition] = r.At })
	if len(got) != 1 || got[0] != 5 {
		t.Errorf("committed offsets %v, want only partition 0 at 5", got)
	}
}
