package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/cascade-kafka/cascade/internal/certtest"
)

// TestClusterSplitRolesSecured runs three process.roles=controller voters
// whose only listener is SSL with client certificates required, and two
// process.roles=broker nodes whose only listener is SASL_SSL (PLAIN), also
// their inter-broker listener: the brokers follow the metadata log as
// observers and register and heartbeat over TLS with their certificate, a
// client's CreateTopics reaches a controller-only node forwarded in an
// Envelope, and an RF=2 topic's follower fetches over SASL_SSL join the
// ISR, so acks=all records written through one broker read back.
func TestClusterSplitRolesSecured(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/cascade and starts five processes")
	}
	tmp := t.TempDir()
	ca := certtest.NewCA(t, "CN=Split CA")
	node := ca.Issue(t, "CN=localhost,O=Split", "localhost", "127.0.0.1")
	common := []string{
		"controller.listener.names=CONTROLLER",
		"broker.heartbeat.interval.ms=500",
		"broker.session.timeout.ms=4000",
		"offsets.topic.replication.factor=2",
		"ssl.keystore.type=PKCS12",
		"ssl.keystore.location=" + node.PKCS12(t, tmp, "node.p12", "node-pw"),
		"ssl.keystore.password=node-pw",
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + ca.TrustPEM(t, tmp, "trust.pem"),
		"listener.name.controller.ssl.client.auth=required",
	}
	sc := startSplitCluster(t, 3, 2, common, func(port int) []string {
		return []string{"process.roles=controller", "listener.security.protocol.map=CONTROLLER:SSL",
			fmt.Sprintf("listeners=CONTROLLER://127.0.0.1:%d", port)}
	}, func(addr string) []string {
		return []string{"process.roles=broker", "listeners=BROKER://" + addr,
			"listener.security.protocol.map=BROKER:SASL_SSL,CONTROLLER:SSL",
			"inter.broker.listener.name=BROKER", "sasl.enabled.mechanisms=PLAIN",
			"sasl.mechanism.inter.broker.protocol=PLAIN",
			`listener.name.broker.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required ` +
				`username="broker" password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";`}
	})
	seeds := sc.seeds
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}),
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	poll := func(what string, f func() error) {
		t.Helper()
		var last error
		for ctx.Err() == nil {
			if last = f(); last == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%s: %v", what, last)
	}
	poll("both brokers registered over the SSL controller listener", func() error {
		m, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		var ids []int32
		for _, b := range m.Brokers {
			ids = append(ids, b.NodeID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []int32{4, 5}) {
			return fmt.Errorf("brokers %v", ids)
		}
		return nil
	})
	adm := kadm.NewClient(cl)
	const topic = "split-secured"
	poll("CreateTopics forwarded to a controller-only node", func() error {
		_, err := adm.CreateTopic(ctx, 1, 2, nil, topic)
		return err
	})
	poll("the follower in the ISR over SASL_SSL", func() error {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		if p := td[topic].Partitions[0]; len(p.ISR) != 2 {
			return fmt.Errorf("ISR %v", p.ISR)
		}
		return nil
	})
	const n = 50
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}),
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := 0
	for got < n && ctx.Err() == nil {
		got += cons.PollFetches(ctx).NumRecords()
	}
	if got != n {
		t.Fatalf("read back %d of %d records", got, n)
	}
}
