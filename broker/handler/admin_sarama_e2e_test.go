package handler_test

import (
	"errors"
	"testing"

	"github.com/IBM/sarama"

	"github.com/cascade-kafka/cascade/broker/brokertest"
)

// TestAdminSaramaE2E drives the admin APIs through sarama's ClusterAdmin,
// which picks its request versions from the configured Kafka version rather
// than from ApiVersions, so older versions are exercised too.
func TestAdminSaramaE2E(t *testing.T) {
	for _, v := range []sarama.KafkaVersion{sarama.V2_8_0_0, sarama.V4_0_0_0} {
		t.Run(v.String(), func(t *testing.T) {
			b := brokertest.Start(t)
			cfg := sarama.NewConfig()
			cfg.Version = v
			adm, err := sarama.NewClusterAdmin([]string{b.Addr()}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer adm.Close()

			retention := "3600000"
			err = adm.CreateTopic("s", &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1,
				ConfigEntries: map[string]*string{"retention.ms": &retention}}, false)
			if err != nil {
				t.Fatal(err)
			}
			var te *sarama.TopicError
			err = adm.CreateTopic("s", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false)
			if !errors.As(err, &te) || te.Err != sarama.ErrTopicAlreadyExists {
				t.Fatalf("existing topic: %v", err)
			}
			if err := adm.CreatePartitions("s", 3, nil, false); err != nil {
				t.Fatal(err)
			}
			entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "s", ConfigNames: []string{"retention.ms"}})
			if err != nil || len(entries) != 1 || entries[0].Value != retention || entries[0].Source != sarama.SourceTopic {
				t.Fatalf("%v %+v", err, entries)
			}
			seg := "60000"
			err = adm.IncrementalAlterConfig(sarama.TopicResource, "s", map[string]sarama.IncrementalAlterConfigsEntry{
				"segment.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &seg}}, false)
			if err != nil {
				t.Fatal(err)
			}
			bad := "x"
			err = adm.AlterConfig(sarama.TopicResource, "s", map[string]*string{"segment.ms": &bad}, false)
			if !errors.Is(err, sarama.ErrInvalidConfig) {
				t.Fatalf("invalid config: %v", err)
			}
			topics, err := adm.ListTopics()
			if err != nil || topics["s"].NumPartitions != 3 {
				t.Fatalf("%v %+v", err, topics["s"])
			}
			brokers, controller, err := adm.DescribeCluster()
			if err != nil || len(brokers) != 1 || controller != 1 {
				t.Fatalf("%v %v %d", err, brokers, controller)
			}
			dirs, err := adm.DescribeLogDirs([]int32{1})
			if err != nil || len(dirs[1]) != 1 {
				t.Fatalf("%v %+v", err, dirs)
			}
			if err := adm.DeleteTopic("s"); err != nil {
				t.Fatal(err)
			}
			if err := adm.DeleteTopic("s"); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
				t.Fatalf("second delete: %v", err)
			}
		})
	}
}
