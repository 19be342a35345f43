package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupStaticDowngrade is KIP-848's downgrade by static replacement end
// to end with franz-go: a static consumer protocol member owns every
// partition and shuts down (a static leave keeps its assignment); a classic
// consumer with the same group.instance.id takes its place, which turns the
// consumer group into a classic group (Kafka's
// classicGroupJoinToConsumerGroup then convertToClassicGroup), and the
// classic consumer receives the replaced member's partitions.
func TestGroupStaticDowngrade(t *testing.T) {
	staticDowngrade(t, startGroupBroker(t).Addr(), "static-downgrade")
}

// TestGroupStaticDowngradeOracle runs the same scenario against Apache
// Kafka, which is the specification.
func TestGroupStaticDowngradeOracle(t *testing.T) {
	staticDowngrade(t, oracleAddr(t), oracleTopic("static-downgrade"))
}

func staticDowngrade(t *testing.T, addr, topic string) {
	const parts = 3
	group := topic + "-group"
	ctx, admin := groupScenarioTopic(t, addr, topic, parts)
	common := []kgo.Opt{
		kgo.SeedBrokers(addr), fastMeta, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.InstanceID("instance-1"),
		kgo.HeartbeatInterval(100 * time.Millisecond), kgo.SessionTimeout(6 * time.Second),
		kgo.RebalanceTimeout(5 * time.Second),
	}

	var first owned
	consumer, err := kgo.NewClient(append(append([]kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer())}, common...), first.opts(topic)...)...)
	if err != nil {
		t.Fatal(err)
	}
	stopConsumer := pollUntilStopped(consumer)
	waitFor(ctx, t, "the static consumer protocol member to own every partition", func() (bool, string) {
		got := first.get()
		typ := groupType(ctx, t, admin, group)
		return len(got) == parts && typ == "consumer", fmt.Sprintf("%v, type %s", got, typ)
	})
	stopConsumer()

	var second owned
	classic, err := kgo.NewClient(append(common, second.opts(topic)...)...)
	if err != nil {
		t.Fatal(err)
	}
	stopClassic := pollUntilStopped(classic)
	defer stopClassic()
	waitFor(ctx, t, "the classic replacement to own every partition of a classic group", func() (bool, string) {
		got := second.get()
		typ := groupType(ctx, t, admin, group)
		return len(got) == parts && typ == "classic", fmt.Sprintf("%v, type %s", got, typ)
	})
	described, err := kadm.NewClient(admin).DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	d := described[group]
	if d.State != "Stable" || len(d.Members) != 1 || d.Members[0].InstanceID == nil || *d.Members[0].InstanceID != "instance-1" {
		t.Errorf("downgraded group: state %s, members %+v; want Stable with instance-1 alone", d.State, d.Members)
	}
}
