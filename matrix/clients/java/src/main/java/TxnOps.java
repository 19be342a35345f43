import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * TxnOps holds the Java driver's transactional operations: transform
 * (exactly-once consume-transform-produce with sendOffsetsToTransaction and
 * the consumer's group metadata, KIP-447) and the long-lived transactional
 * producers of producer_open, producer_send and producer_close.
 */
final class TxnOps {
    /** TxnProducer is a producer of producer_open and whether its transaction is open. */
    static final class TxnProducer {
        final KafkaProducer<byte[], byte[]> producer;
        boolean inTxn;

        TxnProducer(KafkaProducer<byte[], byte[]> producer) {
            this.producer = producer;
        }
    }

    final String bootstrap;
    final Map<String, TxnProducer> producers = new HashMap<>();

    TxnOps(String bootstrap) {
        this.bootstrap = bootstrap;
    }

    /** Creates a transactional producer and runs initTransactions, which fences older producers of the id. */
    KafkaProducer<byte[], byte[]> txnProducer(String id, String clientId) throws Driver.DriverException {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, Driver.REQUEST_TIMEOUT_MS);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, Driver.REQUEST_TIMEOUT_MS);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, Driver.DELIVERY_TIMEOUT_MS);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        KafkaProducer<byte[], byte[]> prod;
        try {
            prod = new KafkaProducer<>(p);
        } catch (RuntimeException e) {
            throw Driver.mapError(e);
        }
        try {
            prod.initTransactions();
        } catch (RuntimeException e) {
            prod.close(Duration.ofSeconds(2));
            throw Driver.mapError(e);
        }
        return prod;
    }

    /** Sends every record and waits for its acknowledgement; the first failure throws. */
    static ArrayNode sendAll(KafkaProducer<byte[], byte[]> prod, List<ProducerRecord<byte[], byte[]>> recs)
            throws Driver.DriverException {
        List<java.util.concurrent.Future<RecordMetadata>> futures = new ArrayList<>();
        ArrayNode out = Driver.JSON.createArrayNode();
        try {
            for (ProducerRecord<byte[], byte[]> r : recs) {
                futures.add(prod.send(r));
            }
            prod.flush();
            for (java.util.concurrent.Future<RecordMetadata> f : futures) {
                RecordMetadata md = f.get(Driver.DELIVERY_TIMEOUT_MS + 5_000L, TimeUnit.MILLISECONDS);
                ObjectNode d = out.addObject();
                d.put("partition", md.partition());
                d.put("offset", md.offset());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Driver.DriverException("CLIENT_ERROR", "interrupted");
        } catch (Exception e) {
            throw Driver.mapError(e);
        }
        return out;
    }

    ObjectNode producerOpen(JsonNode a) throws Driver.DriverException {
        String name = Driver.text(a, "producer");
        if (producers.containsKey(name)) {
            throw new Driver.DriverException("CLIENT_ERROR", "producer " + name + " is already open");
        }
        producers.put(name, new TxnProducer(txnProducer(Driver.text(a, "transactional_id"), "matrix-java-txn-producer")));
        return Driver.JSON.createObjectNode();
    }

    TxnProducer producer(JsonNode a) throws Driver.DriverException {
        TxnProducer tp = producers.get(Driver.text(a, "producer"));
        if (tp == null) {
            throw new Driver.DriverException("CLIENT_ERROR", "no open producer " + a.path("producer"));
        }
        return tp;
    }

    ObjectNode producerSend(JsonNode a) throws Driver.DriverException {
        TxnProducer tp = producer(a);
        String end = a.path("end").asText("");
        if (!end.equals("commit") && !end.equals("abort") && !end.equals("open")) {
            throw new Driver.DriverException("CLIENT_ERROR", "unknown transaction end " + end);
        }
        String topic = Driver.text(a, "topic");
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        for (JsonNode r : a.path("records")) {
            recs.add(new ProducerRecord<>(topic, Math.max(r.path("partition").asInt(0), 0),
                Driver.bytes(r.get("key")), Driver.bytes(r.get("value"))));
        }
        ObjectNode n = Driver.JSON.createObjectNode();
        try {
            if (!tp.inTxn) {
                tp.producer.beginTransaction();
                tp.inTxn = true;
            }
            n.set("deliveries", sendAll(tp.producer, recs));
            if (!end.equals("open")) {
                tp.inTxn = false;
                if (end.equals("commit")) {
                    tp.producer.commitTransaction();
                } else {
                    tp.producer.abortTransaction();
                }
            }
        } catch (RuntimeException e) {
            throw Driver.mapError(e);
        }
        return n;
    }

    ObjectNode producerClose(JsonNode a) throws Driver.DriverException {
        TxnProducer tp = producer(a);
        producers.remove(Driver.text(a, "producer"));
        try {
            tp.producer.close(Duration.ofSeconds(2));
        } catch (RuntimeException e) {
            throw Driver.mapError(e);
        }
        return Driver.JSON.createObjectNode();
    }

    void close() {
        for (TxnProducer tp : producers.values()) {
            tp.producer.close(Duration.ofSeconds(2));
        }
        producers.clear();
    }

    ObjectNode transform(JsonNode a) throws Driver.DriverException {
        int count = a.path("count").asInt(0);
        int batch = a.path("batch").asInt(0);
        if (batch <= 0) {
            throw new Driver.DriverException("CLIENT_ERROR", "transform needs a positive batch");
        }
        String input = Driver.text(a, "input");
        String output = Driver.text(a, "output");
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "matrix-java-transform");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, Driver.text(a, "group"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, batch);
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 200);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, Driver.REQUEST_TIMEOUT_MS);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, Driver.REQUEST_TIMEOUT_MS);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        KafkaProducer<byte[], byte[]> prod = txnProducer(Driver.text(a, "transactional_id"), "matrix-java-transform");
        KafkaConsumer<byte[], byte[]> c;
        try {
            c = new KafkaConsumer<>(p);
        } catch (RuntimeException e) {
            prod.close(Duration.ofSeconds(2));
            throw Driver.mapError(e);
        }
        ObjectNode n = Driver.JSON.createObjectNode();
        ArrayNode done = n.putArray("records");
        ArrayNode aborted = null;
        int transactions = 0;
        Map<Integer, Long> committed = new TreeMap<>();
        try {
            c.subscribe(List.of(input));
            long deadline = System.nanoTime() + a.path("timeout_ms").asLong(10_000) * 1_000_000L;
            while (true) {
                boolean last = done.size() >= count;
                if (last && (!a.path("abort_last").asBoolean(false) || aborted != null)) {
                    break;
                }
                int want = last ? batch : Math.min(batch, count - done.size());
                long left = (deadline - System.nanoTime()) / 1_000_000L;
                if (left <= 0) {
                    break; // The orchestrator sees the shortfall.
                }
                List<ConsumerRecord<byte[], byte[]>> recs = new ArrayList<>();
                Map<TopicPartition, Long> rewind = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(Math.min(left, 200)))) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    if (recs.size() < want && !rewind.containsKey(tp)) {
                        recs.add(r);
                    } else {
                        rewind.putIfAbsent(tp, r.offset()); // Polled beyond the batch: read again next time.
                    }
                }
                rewind.forEach(c::seek);
                if (recs.isEmpty()) {
                    continue;
                }
                ArrayNode json = Driver.JSON.createArrayNode();
                List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    Driver.recordJson(json, r);
                    out.add(new ProducerRecord<>(output, r.partition(), null, r.key(), r.value(), r.headers()));
                    offsets.merge(new TopicPartition(input, r.partition()), new OffsetAndMetadata(r.offset() + 1),
                        (x, y) -> x.offset() >= y.offset() ? x : y);
                }
                prod.beginTransaction();
                sendAll(prod, out);
                prod.sendOffsetsToTransaction(offsets, c.groupMetadata());
                if (last) {
                    prod.abortTransaction();
                    aborted = json;
                    continue;
                }
                prod.commitTransaction();
                transactions++;
                done.addAll(json);
                offsets.forEach((tp, om) -> committed.merge(tp.partition(), om.offset(), Math::max));
            }
        } catch (RuntimeException e) {
            throw Driver.mapError(e);
        } finally {
            c.close(Duration.ofSeconds(5)); // Leaves the group.
            prod.close(Duration.ofSeconds(2));
        }
        n.put("transactions", transactions);
        if (aborted != null) {
            n.set("aborted", aborted);
        }
        ArrayNode cs = n.putArray("committed");
        committed.forEach((part, off) -> {
            ObjectNode po = cs.addObject();
            po.put("partition", part);
            po.put("offset", off);
        });
        return n;
    }
}
