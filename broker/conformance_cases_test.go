package broker_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// conformanceTopic returns a topic name unique to this run, since the
// oracle is shared by every conformance test of the binary.
func conformanceTopic(t *testing.T, suffix string) string {
	return fmt.Sprintf("conf-%s-%d", suffix, time.Now().UnixNano()%1_000_000_000)
}

func createTopicsReq(v int16, validateOnly bool, topics ...kmsg.CreateTopicsRequestTopic) *kmsg.CreateTopicsRequest {
	r := kmsg.NewPtrCreateTopicsRequest()
	r.SetVersion(v)
	r.TimeoutMillis = 10000
	r.ValidateOnly = validateOnly
	r.Topics = topics
	return r
}

func newTopic(name string, parts int32, rf int16, configs ...string) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = name, parts, rf
	for i := 0; i+1 < len(configs); i += 2 {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = configs[i], kmsg.StringPtr(configs[i+1])
		t.Configs = append(t.Configs, c)
	}
	return t
}

// createBoth creates a topic on both brokers and fails unless both succeed.
// It returns once Kafka leads every partition: Kafka answers CreateTopics
// before its broker leads the new partitions, and a produce in between
// fails with NOT_LEADER_OR_FOLLOWER.
func (p *pair) createBoth(t *testing.T, name string, parts int32, configs ...string) {
	t.Helper()
	k, c := p.both(createTopicsReq(7, false, newTopic(name, parts, 1, configs...)))
	for who, r := range map[string]kmsg.Response{"kafka": k, "cascade": c} {
		if code := r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
			t.Fatalf("%s: creating %s: %v", who, name, kerr.ErrorForCode(code))
		}
	}
	// ListOffsets goes through the partition's leader, as Produce does,
	// and answers a retriable error until there is one.
	for part := int32(0); part < parts; part++ {
		for i := 0; ; i++ {
			r := p.kafka.do(listOffsetsReq(7, 0, name, part, -1)).(*kmsg.ListOffsetsResponse)
			err := kerr.ErrorForCode(r.Topics[0].Partitions[0].ErrorCode)
			if !kerr.IsRetriable(err) {
				break
			}
			if i > 100 {
				t.Fatalf("kafka: %s-%d not ready: %v", name, part, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func metadataReq(v int16, allowAuto bool, topics ...string) *kmsg.MetadataRequest {
	r := kmsg.NewPtrMetadataRequest()
	r.SetVersion(v)
	r.AllowAutoTopicCreation = allowAuto
	for _, n := range topics {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(n)
		r.Topics = append(r.Topics, mt)
	}
	return r
}

func TestConformanceMetadata(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "md")
	p.createBoth(t, topic, 3)
	for _, v := range []int16{0, 1, 4, 9, 12, 13} {
		p.check(t, "existing topic", metadataReq(v, true, topic))
		p.check(t, "unknown topic, auto-create off", metadataReq(v, true, topic+"-absent"))
	}
	byID := metadataReq(12, false)
	mt := kmsg.NewMetadataRequestTopic()
	mt.TopicID = [16]byte{1, 2, 3}
	byID.Topics = append(byID.Topics, mt)
	p.check(t, "unknown topic id", byID)
	for _, v := range []int16{1, 4, 12} {
		p.check(t, "invalid topic name", metadataReq(v, false, "bad name!"))
		p.check(t, "invalid topic name, auto-create allowed", metadataReq(v, true, "bad name!"))
	}
}

// confBatch is a record batch with fixed timestamps, so both brokers store
// and serve identical bytes.
func confBatch(t *testing.T, pid int64, epoch int16, seq int32, values ...string) []byte {
	return batch(t, pid, epoch, seq, values...)
}

func TestConformanceProduceErrors(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "pr")
	p.createBoth(t, topic, 1)
	ok := confBatch(t, -1, -1, -1, "a", "b")
	p.check(t, "ok", produceReq(9, -1, topic, 0, ok))
	p.check(t, "unknown topic", produceReq(9, 1, topic+"-absent", 0, ok))
	p.check(t, "unknown partition", produceReq(9, 1, topic, 7, ok))
	p.check(t, "invalid acks", produceReq(9, 2, topic, 0, ok))
	for _, v := range []int16{3, 7, 8, 12} {
		bad := append([]byte(nil), ok...)
		bad[len(bad)-1] ^= 0xff // the last record byte: the CRC no longer matches
		p.check(t, "bad crc", produceReq(v, 1, topic, 0, bad))
	}
	big := confBatch(t, -1, -1, -1, string(make([]byte, 1100<<10)))
	p.check(t, "too large", produceReq(9, 1, topic, 0, big))
	// Null records are not compared: Kafka 4.4 never answers them (the
	// request times out); Cascade answers INVALID_RECORD.
	short := append([]byte(nil), ok...)
	binary.BigEndian.PutUint32(short[8:], 40) // below the batch header size
	p.check(t, "short batch", produceReq(9, 1, topic, 0, short))
	p.check(t, "two batches", produceReq(9, 1, topic, 0, append(append([]byte(nil), ok...), ok...)))
	// Produce v2 closes the connection on both (TestProduceErrors).
	p.check(t, "internal topic, absent on Kafka", produceReq(9, 1, "__transaction_state", 0, ok),
		"ErrorCode: kafka=3 cascade=17")
	p.findGroupCoordinator(t, "conformance")
	p.check(t, "internal topic", produceReq(9, 1, "__consumer_offsets", 0, ok))
	wrongMagic := append([]byte(nil), ok...)
	wrongMagic[16] = 1
	p.check(t, "magic 1", produceReq(9, 1, topic, 0, wrongMagic))
}

// findGroupCoordinator asks both brokers for a group coordinator until
// they have one, which makes Kafka create __consumer_offsets.
func (p *pair) findGroupCoordinator(t *testing.T, group string) {
	t.Helper()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(3)
	fc.CoordinatorKey = group
	for _, rc := range []*rawConn{p.kafka, p.cascade} {
		for i := 0; ; i++ {
			err := kerr.ErrorForCode(rc.do(fc).(*kmsg.FindCoordinatorResponse).ErrorCode)
			if err == nil {
				break
			}
			if !kerr.IsRetriable(err) || i > 100 {
				t.Fatalf("find coordinator: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// initPID asks rc for an idempotent producer id.
func initPID(t *testing.T, rc *rawConn) (int64, int16) {
	t.Helper()
	r := kmsg.NewPtrInitProducerIDRequest()
	r.SetVersion(4)
	r.TransactionTimeoutMillis = 60000
	r.ProducerID, r.ProducerEpoch = -1, -1
	for i := 0; ; i++ {
		resp := rc.do(r).(*kmsg.InitProducerIDResponse)
		err := kerr.ErrorForCode(resp.ErrorCode)
		switch {
		case err == nil:
			return resp.ProducerID, resp.ProducerEpoch
		case kerr.IsRetriable(err) && i < 100:
			time.Sleep(100 * time.Millisecond)
		default:
			t.Fatalf("init producer id: %v", err)
		}
	}
}

func TestConformanceIdempotentProduce(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "idem")
	p.createBoth(t, topic, 1)
	kpid, _ := initPID(t, p.kafka)
	cpid, _ := initPID(t, p.cascade)
	// The producer ids differ, so each broker gets its own batch; the
	// answers are compared.
	step := func(name string, epoch int16, seq int32, values ...string) {
		t.Helper()
		kreq := produceReq(9, -1, topic, 0, confBatch(t, kpid, epoch, seq, values...))
		creq := produceReq(9, -1, topic, 0, confBatch(t, cpid, epoch, seq, values...))
		k, c := p.kafka.do(kreq), p.cascade.do(creq)
		for _, d := range diffResponses(k, c) {
			t.Errorf("%s: %s", name, d)
		}
	}
	step("first", 0, 0, "a", "b")
	step("duplicate sequence", 0, 0, "a", "b")
	step("next", 0, 2, "c")
	step("out of order sequence", 0, 5, "d")
	step("new epoch from 0", 1, 0, "e")
	step("old epoch", 0, 3, "f")
	step("new epoch not from 0", 3, 7, "g")
}

func fetchOf(v int16, topic string, id [16]byte, isolation int8, parts ...fetchPos) *kmsg.FetchRequest {
	r := fetchReq(v, topic, id, parts...)
	r.MaxWaitMillis = 0
	r.IsolationLevel = isolation
	return r
}

// topicIDs returns the topic's id on each broker.
func (p *pair) topicIDs(t *testing.T, topic string) (kafka, cascade [16]byte) {
	t.Helper()
	k, c := p.both(metadataReq(12, false, topic))
	return k.(*kmsg.MetadataResponse).Topics[0].TopicID, c.(*kmsg.MetadataResponse).Topics[0].TopicID
}

func TestConformanceFetch(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "fe")
	p.createBoth(t, topic, 2)
	p.both(produceReq(9, -1, topic, 0, confBatch(t, -1, -1, -1, "a", "b", "c")))
	kid, cid := p.topicIDs(t, topic)
	for _, v := range []int16{4, 11, 12} {
		for _, iso := range []int8{0, 1} {
			p.check(t, "data and empty", fetchOf(v, topic, [16]byte{}, iso, fetchPos{0, 0, 1 << 20}, fetchPos{1, 0, 1 << 20}))
			p.check(t, "middle offset", fetchOf(v, topic, [16]byte{}, iso, fetchPos{0, 1, 1 << 20}))
		}
		p.check(t, "out of range", fetchOf(v, topic, [16]byte{}, 0, fetchPos{0, 100, 1 << 20}))
		p.check(t, "unknown partition", fetchOf(v, topic, [16]byte{}, 0, fetchPos{5, 0, 1 << 20}))
		p.check(t, "unknown topic", fetchOf(v, topic+"-absent", [16]byte{}, 0, fetchPos{0, 0, 1 << 20}))
	}
	// From v13 topics are named by id, which differ between brokers.
	for _, v := range []int16{13, 17} {
		k, c := p.kafka.do(fetchOf(v, "", kid, 0, fetchPos{0, 0, 1 << 20})), p.cascade.do(fetchOf(v, "", cid, 0, fetchPos{0, 0, 1 << 20}))
		for _, d := range diffResponses(k, c) {
			t.Errorf("fetch by id v%d: %s", v, d)
		}
		p.check(t, "unknown topic id", fetchOf(v, "", [16]byte{9, 9, 9}, 0, fetchPos{0, 0, 1 << 20}))
	}
	// Fetch sessions (KIP-227).
	unknown := fetchOf(12, topic, [16]byte{}, 0, fetchPos{0, 0, 1 << 20})
	unknown.SessionID, unknown.SessionEpoch = 123456, 1
	p.check(t, "unknown session", unknown)
	open := fetchOf(12, topic, [16]byte{}, 0, fetchPos{0, 0, 1 << 20})
	open.SessionID, open.SessionEpoch = 0, 0
	k, c := p.check(t, "open session", open)
	ks, cs := k.(*kmsg.FetchResponse).SessionID, c.(*kmsg.FetchResponse).SessionID
	for _, s := range []struct {
		name  string
		epoch int32
	}{{"wrong session epoch", 5}, {"incremental", 1}} {
		kr := fetchOf(12, topic, [16]byte{}, 0)
		kr.SessionID, kr.SessionEpoch = ks, s.epoch
		cr := fetchOf(12, topic, [16]byte{}, 0)
		cr.SessionID, cr.SessionEpoch = cs, s.epoch
		k, c := p.kafka.do(kr), p.cascade.do(cr)
		for _, d := range diffResponses(k, c) {
			t.Errorf("%s: %s", s.name, d)
		}
	}
	badEpoch := fetchOf(12, topic, [16]byte{}, 0, fetchPos{0, 0, 1 << 20})
	badEpoch.SessionID, badEpoch.SessionEpoch = 0, 3 // a new session must start at epoch 0
	p.check(t, "sessionless with epoch", badEpoch)
}

func listOffsetsReq(v int16, isolation int8, topic string, part int32, ts int64) *kmsg.ListOffsetsRequest {
	r := kmsg.NewPtrListOffsetsRequest()
	r.SetVersion(v)
	r.ReplicaID = -1
	r.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = part, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return r
}

func TestConformanceListOffsets(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "lo")
	p.createBoth(t, topic, 1)
	p.both(produceReq(9, -1, topic, 0, confBatch(t, -1, -1, -1, "a", "b", "c")))
	for _, v := range []int16{1, 4, 7, 9, 10} {
		for _, ts := range []int64{-1, -2, -3, -4, -5, 1_700_000_000_000, 1_700_000_000_001, 1_800_000_000_000} {
			if (ts == -3 && v < 7) || (ts == -4 && v < 8) || (ts == -5 && v < 9) {
				continue
			}
			p.check(t, fmt.Sprintf("timestamp %d", ts), listOffsetsReq(v, 0, topic, 0, ts))
		}
		if v >= 2 {
			p.check(t, "latest read_committed", listOffsetsReq(v, 1, topic, 0, -1))
		}
		p.check(t, "unknown partition", listOffsetsReq(v, 0, topic, 4, -1))
		p.check(t, "unknown topic", listOffsetsReq(v, 0, topic+"-absent", 0, -1))
	}
}

func TestConformanceCreateDeleteTopics(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "ct")
	p.createBoth(t, topic, 1)
	for _, v := range []int16{2, 4, 5, 7} {
		p.check(t, "exists", createTopicsReq(v, false, newTopic(topic, 1, 1)))
		p.check(t, "invalid name", createTopicsReq(v, false, newTopic("bad name!", 1, 1)))
		p.check(t, "dot name", createTopicsReq(v, false, newTopic("..", 1, 1)))
		p.check(t, "zero partitions", createTopicsReq(v, false, newTopic(topic+"-z", 0, 1)))
		p.check(t, "replication factor 3", createTopicsReq(v, false, newTopic(topic+"-rf", 1, 3)))
		p.check(t, "unknown config", createTopicsReq(v, false, newTopic(topic+"-cfg", 1, 1, "no.such.config", "1")))
		p.check(t, "bad config value", createTopicsReq(v, false, newTopic(topic+"-cfg", 1, 1, "retention.ms", "soon")))
		p.check(t, "validate only", createTopicsReq(v, true, newTopic(topic+"-vo", 2, 1)))
		p.check(t, "validate only, configs", createTopicsReq(v, true, newTopic(topic+"-vo", 2, 1,
			"min.insync.replicas", "1", "retention.ms", "1000", "max.decompressed.message.bytes", "2147483639")))
		p.check(t, "duplicate in request", createTopicsReq(v, false, newTopic(topic+"-dup", 1, 1), newTopic(topic+"-dup", 1, 1)))
	}
	del := func(v int16, names ...string) *kmsg.DeleteTopicsRequest {
		r := kmsg.NewPtrDeleteTopicsRequest()
		r.SetVersion(v)
		r.TimeoutMillis = 10000
		r.TopicNames = names
		for _, n := range names {
			dt := kmsg.NewDeleteTopicsRequestTopic()
			dt.Topic = kmsg.StringPtr(n)
			r.Topics = append(r.Topics, dt)
		}
		return r
	}
	// Kafka sends the error's default message with DeleteTopics v5+.
	for _, v := range []int16{1, 4, 5, 6} {
		p.check(t, "delete unknown", del(v, topic+"-absent"))
	}
	byID := del(6)
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.TopicID = [16]byte{7, 7, 7}
	byID.Topics = append(byID.Topics, dt)
	p.check(t, "delete unknown id", byID)
	p.check(t, "delete internal", del(6, "__consumer_offsets-absent-"+topic))
	p.check(t, "delete", del(6, topic))
}

func TestConformanceDescribeTopicConfigs(t *testing.T) {
	p := newPair(t)
	topic := conformanceTopic(t, "dc")
	p.createBoth(t, topic, 1, "retention.ms", "3600000", "cleanup.policy", "compact")
	for _, v := range []int16{1, 3, 4} {
		r := kmsg.NewPtrDescribeConfigsRequest()
		r.SetVersion(v)
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		r.Resources = append(r.Resources, res)
		r.IncludeSynonyms = true
		k, c := p.both(r)
		kc, cc := configsByName(k), configsByName(c)
		for name, kv := range kc {
			cv, ok := cc[name]
			if !ok {
				t.Errorf("v%d: config %s missing from Cascade (kafka %s)", v, name, kv)
				continue
			}
			if kv != cv {
				t.Errorf("v%d: config %s: kafka %s cascade %s", v, name, kv, cv)
			}
		}
		for name, cv := range cc {
			if _, ok := kc[name]; !ok {
				t.Errorf("v%d: config %s only in Cascade (%s)", v, name, cv)
			}
		}
	}
	// The cluster-wide dynamic broker defaults: min.insync.replicas,
	// which a new Kafka 4 cluster writes for eligible leader replicas.
	cluster := kmsg.NewPtrDescribeConfigsRequest()
	cluster.SetVersion(4)
	cres := kmsg.NewDescribeConfigsRequestResource()
	cres.ResourceType = kmsg.ConfigResourceTypeBroker
	cluster.Resources = append(cluster.Resources, cres)
	cluster.IncludeSynonyms = true
	p.check(t, "cluster-wide broker defaults", cluster)
	r := kmsg.NewPtrDescribeConfigsRequest()
	r.SetVersion(4)
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic+"-absent"
	r.Resources = append(r.Resources, res)
	p.check(t, "unknown topic", r)
}

// configsByName renders each config of a DescribeConfigs answer as
// "value source readOnly sensitive type synonyms".
func configsByName(r kmsg.Response) map[string]string {
	out := map[string]string{}
	for _, res := range r.(*kmsg.DescribeConfigsResponse).Resources {
		for _, c := range res.Configs {
			v := "null"
			if c.Value != nil {
				v = *c.Value
			}
			var syn []string
			for _, s := range c.ConfigSynonyms {
				syn = append(syn, fmt.Sprintf("%s(%d)", s.Name, s.Source))
			}
			out[c.Name] = fmt.Sprintf("value=%s source=%d readOnly=%v sensitive=%v type=%d synonyms=%v",
				v, c.Source, c.ReadOnly, c.IsSensitive, c.ConfigType, syn)
		}
	}
	return out
}

func TestConformanceInitProducerID(t *testing.T) {
	p := newPair(t)
	for _, v := range []int16{0, 2, 3, 4, 5} {
		r := kmsg.NewPtrInitProducerIDRequest()
		r.SetVersion(v)
		r.TransactionTimeoutMillis = 60000
		r.ProducerID, r.ProducerEpoch = -1, -1
		p.check(t, "idempotent", r)
		if v >= 3 {
			r.ProducerID, r.ProducerEpoch = 12345, 0
			p.check(t, "idempotent with unknown id", r)
		}
	}
	txnID := conformanceTopic(t, "txn")
	// As a client does: find the coordinator first (Kafka creates
	// __transaction_state then) and retry while it loads.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(3)
	fc.CoordinatorKey, fc.CoordinatorType = txnID, 1
	for _, rc := range []*rawConn{p.kafka, p.cascade} {
		for i := 0; ; i++ {
			err := kerr.ErrorForCode(rc.do(fc).(*kmsg.FindCoordinatorResponse).ErrorCode)
			if err == nil {
				break
			}
			if !kerr.IsRetriable(err) || i > 100 {
				t.Fatalf("find coordinator: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	r := kmsg.NewPtrInitProducerIDRequest()
	r.SetVersion(4)
	r.TransactionalID = kmsg.StringPtr(txnID)
	r.TransactionTimeoutMillis = 60000
	r.ProducerID, r.ProducerEpoch = -1, -1
	var answers [2]kmsg.Response
	for j, rc := range []*rawConn{p.kafka, p.cascade} {
		for i := 0; ; i++ {
			answers[j] = rc.do(r)
			err := kerr.ErrorForCode(answers[j].(*kmsg.InitProducerIDResponse).ErrorCode)
			if err == nil || !kerr.IsRetriable(err) || i > 100 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, d := range diffResponses(answers[0], answers[1]) {
		t.Errorf("transactional: %s", d)
	}
	r.TransactionTimeoutMillis = 1 << 30
	r.TransactionalID = kmsg.StringPtr(txnID + "-long")
	p.check(t, "transaction timeout too large", r)
	p.check(t, "null transactional id, v0", func() kmsg.Request {
		r := kmsg.NewPtrInitProducerIDRequest()
		r.SetVersion(0)
		r.TransactionTimeoutMillis = 60000
		return r
	}())
}
