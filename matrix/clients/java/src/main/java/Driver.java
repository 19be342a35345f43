import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListConsumerGroupOffsetsSpec;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnknownServerException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Driver is the Java matrix driver: Apache Kafka's own client (kafka-clients:
 * KafkaProducer, KafkaConsumer, Admin) behind the line-delimited JSON driver
 * protocol of matrix/README.md. It reads one command per line on stdin and
 * answers one line per command on stdout; logs go to stderr.
 */
public final class Driver {
    static final String CLIENT = "java";
    static final int PROTOCOL = 1;
    /** Keeps every command well inside the orchestrator's 30-second cell timeout. */
    static final int REQUEST_TIMEOUT_MS = 10_000;
    static final int DELIVERY_TIMEOUT_MS = 15_000;
    static final long ADMIN_WAIT_MS = 15_000;

    static final ObjectMapper JSON = new ObjectMapper();

    /** DriverException is an error answered with a Kafka error name. */
    static final class DriverException extends Exception {
        final String code;

        DriverException(String code, String message) {
            super(message);
            this.code = code;
        }

        ObjectNode toJson() {
            ObjectNode n = JSON.createObjectNode();
            n.put("code", code);
            n.put("message", getMessage() == null ? "" : getMessage());
            return n;
        }
    }

    static DriverException unsupported(String why) {
        return new DriverException("UNSUPPORTED", why);
    }

    /**
     * Maps a client exception to Kafka's error name, as
     * org.apache.kafka.common.protocol.Errors.forException does, except for the
     * failures that happen in the client before a broker answered.
     */
    static DriverException mapError(Throwable t) {
        while ((t instanceof ExecutionException || t instanceof CompletionException) && t.getCause() != null) {
            t = t.getCause();
        }
        if (t instanceof DriverException) {
            return (DriverException) t;
        }
        String msg = String.valueOf(t.getMessage());
        if (t instanceof org.apache.kafka.clients.consumer.OffsetOutOfRangeException) {
            // The consumer's exception for a fetch answered OFFSET_OUT_OF_RANGE
            // with auto.offset.reset=none.
            return new DriverException("OFFSET_OUT_OF_RANGE", msg);
        }
        if (t instanceof TimeoutException || t instanceof java.util.concurrent.TimeoutException) {
            // KafkaProducer.send waits max.block.ms for a topic to appear in
            // metadata; a topic that never does ends here.
            if (msg.contains("not present in metadata")) {
                return new DriverException("CLIENT_UNKNOWN_TOPIC", msg);
            }
            return new DriverException("CLIENT_TIMEOUT", msg);
        }
        if (t instanceof ApiException) {
            Errors e = Errors.forException(t);
            if (e != Errors.UNKNOWN_SERVER_ERROR || t instanceof UnknownServerException) {
                return new DriverException(e.name(), msg);
            }
        }
        return new DriverException("CLIENT_ERROR", t.getClass().getName() + ": " + msg);
    }

    static <T> T await(KafkaFuture<T> f) throws DriverException {
        try {
            return f.get(ADMIN_WAIT_MS, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new DriverException("CLIENT_ERROR", "interrupted");
        } catch (Exception e) {
            throw mapError(e);
        }
    }

    static byte[] bytes(JsonNode n) throws DriverException {
        if (n == null || n.isNull()) {
            return null;
        }
        try {
            return Base64.getDecoder().decode(n.asText());
        } catch (IllegalArgumentException e) {
            throw new DriverException("CLIENT_ERROR", "bad base64: " + e.getMessage());
        }
    }

    static String b64(byte[] b) {
        return b == null ? null : Base64.getEncoder().encodeToString(b);
    }

    static String text(JsonNode args, String field) throws DriverException {
        JsonNode n = args.get(field);
        if (n == null || !n.isTextual()) {
            throw new DriverException("CLIENT_ERROR", "missing string argument " + field);
        }
        return n.asText();
    }

    final String bootstrap;
    Admin admin;
    final TxnOps txn;
    /** Group members of crash commands: never closed; the process is killed. */
    final List<KafkaConsumer<byte[], byte[]>> abandoned = new ArrayList<>();

    /** The client configs of hello's security (driver.Security), added to every client's. */
    final Properties sec;

    Driver(String bootstrap, JsonNode security) {
        this.bootstrap = bootstrap;
        this.txn = new TxnOps(bootstrap);
        this.sec = securityConfigs(security);
    }

    /**
     * Returns Kafka's client configs for hello's security: security.protocol,
     * sasl.mechanism with a PlainLoginModule or ScramLoginModule sasl.jaas.config,
     * and PEM trust and key stores (KIP-651) for TLS.
     */
    static Properties securityConfigs(JsonNode s) {
        Properties p = new Properties();
        String protocol = s == null ? "" : s.path("protocol").asText("");
        if (protocol.isEmpty()) {
            return p;
        }
        p.put("security.protocol", protocol);
        if (protocol.startsWith("SASL_")) {
            String mech = s.path("mechanism").asText("");
            String module = mech.equals("PLAIN") ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                : "org.apache.kafka.common.security.scram.ScramLoginModule";
            p.put("sasl.mechanism", mech);
            p.put("sasl.jaas.config", module + " required username=\"" + jaasQuote(s.path("username").asText(""))
                + "\" password=\"" + jaasQuote(s.path("password").asText("")) + "\";");
        }
        if (protocol.equals("SSL") || protocol.equals("SASL_SSL")) {
            p.put("ssl.truststore.type", "PEM");
            p.put("ssl.truststore.certificates", s.path("ca_pem").asText(""));
            if (!s.path("cert_pem").asText("").isEmpty()) {
                p.put("ssl.keystore.type", "PEM");
                p.put("ssl.keystore.certificate.chain", s.path("cert_pem").asText(""));
                p.put("ssl.keystore.key", s.path("key_pem").asText(""));
            }
        }
        return p;
    }

    static String jaasQuote(String v) {
        return v.replace("\\", "\\\\").replace("\"", "\\\"");
    }

    /** Returns the admin client, created on first use so hello needs no broker. */
    Admin admin() {
        if (admin == null) {
            Properties p = new Properties();
            p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            p.put(AdminClientConfig.CLIENT_ID_CONFIG, "matrix-java-admin");
            p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, REQUEST_TIMEOUT_MS);
            p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) ADMIN_WAIT_MS);
            p.putAll(sec);
            admin = Admin.create(p);
        }
        return admin;
    }

    void close() {
        txn.close();
        if (admin != null) {
            admin.close(Duration.ofSeconds(2));
        }
    }

    /** Returns kafka-clients' version from the properties file its jar carries. */
    static String kafkaVersion() {
        try (java.io.InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            Properties p = new Properties();
            if (in != null) {
                p.load(in);
            }
            return p.getProperty("version", "(unknown)");
        } catch (java.io.IOException e) {
            return "(unknown)";
        }
    }

    ObjectNode info() {
        ObjectNode n = JSON.createObjectNode();
        n.put("library", "org.apache.kafka:kafka-clients " + kafkaVersion());
        n.put("partitioner", "murmur2 (BuiltInPartitioner)");
        return n;
    }

    ObjectNode createTopic(JsonNode a) throws DriverException {
        NewTopic t = new NewTopic(text(a, "topic"), java.util.Optional.of(a.path("partitions").asInt(-1)),
            java.util.Optional.of((short) a.path("replication_factor").asInt(-1)));
        Map<String, String> cfg = new HashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = a.path("configs").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            cfg.put(e.getKey(), e.getValue().asText());
        }
        t.configs(cfg);
        await(admin().createTopics(List.of(t)).all());
        return JSON.createObjectNode();
    }

    ObjectNode deleteTopic(JsonNode a) throws DriverException {
        await(admin().deleteTopics(List.of(text(a, "topic"))).all());
        return JSON.createObjectNode();
    }

    ObjectNode describeTopic(JsonNode a) throws DriverException {
        String topic = text(a, "topic");
        Map<String, TopicDescription> res = await(admin().describeTopics(List.of(topic)).allTopicNames());
        TopicDescription d = res.get(topic);
        if (d == null) {
            throw new DriverException("UNKNOWN_TOPIC_OR_PARTITION", "topic absent from describeTopics result");
        }
        ObjectNode n = JSON.createObjectNode();
        n.put("topic", topic);
        n.put("partitions", d.partitions().size());
        return n;
    }

    ObjectNode createPartitions(JsonNode a) throws DriverException {
        await(admin().createPartitions(Map.of(text(a, "topic"), NewPartitions.increaseTo(a.path("total").asInt()))).all());
        return JSON.createObjectNode();
    }

    ObjectNode describeConfigs(JsonNode a) throws DriverException {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, text(a, "topic"));
        Map<ConfigResource, Config> res = await(admin().describeConfigs(List.of(r)).all());
        ObjectNode cfg = JSON.createObjectNode();
        Config c = res.get(r);
        if (c != null) {
            for (ConfigEntry e : c.entries()) {
                if (e.value() != null) {
                    cfg.put(e.name(), e.value());
                }
            }
        }
        ObjectNode n = JSON.createObjectNode();
        n.set("configs", cfg);
        return n;
    }

    ObjectNode alterConfigs(JsonNode a) throws DriverException {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, text(a, "topic"));
        List<AlterConfigOp> ops = new ArrayList<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = a.path("set").fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue().asText()), AlterConfigOp.OpType.SET));
        }
        for (JsonNode k : a.path("delete")) {
            ops.add(new AlterConfigOp(new ConfigEntry(k.asText(), null), AlterConfigOp.OpType.DELETE));
        }
        Map<ConfigResource, Collection<AlterConfigOp>> req = new HashMap<>();
        req.put(r, ops);
        await(admin().incrementalAlterConfigs(req).all());
        return JSON.createObjectNode();
    }

    ObjectNode produce(JsonNode a) throws DriverException {
        String topic = text(a, "topic");
        String codec = a.path("codec").asText("");
        if (codec.isEmpty()) {
            codec = "none";
        }
        if (!List.of("none", "gzip", "snappy", "lz4", "zstd").contains(codec)) {
            throw new DriverException("CLIENT_ERROR", "unknown codec " + codec);
        }
        int acks = a.path("acks").asInt(-1);
        if (acks != 0 && acks != 1 && acks != -1) {
            throw new DriverException("CLIENT_ERROR", "acks must be 0, 1 or -1, not " + acks);
        }
        String txn = a.path("transactional_id").asText("");
        // "auto_create" needs no setting: the producer's metadata requests
        // always allow auto-creation (ProducerMetadata has no option), so a
        // broker with auto.create.topics.enable creates the topic.
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "matrix-java-producer");
        p.putAll(sec);
        p.put(ProducerConfig.ACKS_CONFIG, acks == -1 ? "all" : Integer.toString(acks));
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, a.path("idempotent").asBoolean(false) || !txn.isEmpty());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 5_000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, REQUEST_TIMEOUT_MS);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, DELIVERY_TIMEOUT_MS);
        p.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, 16 << 20); // Leave the size limit to the broker.
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        if (a.path("max_in_flight").asInt(0) > 0) {
            p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, a.path("max_in_flight").asInt());
        }
        if (a.path("linger_ms").asInt(0) > 0) {
            p.put(ProducerConfig.LINGER_MS_CONFIG, a.path("linger_ms").asInt());
        }
        if (!txn.isEmpty()) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txn);
        }
        KafkaProducer<byte[], byte[]> prod;
        try {
            prod = new KafkaProducer<>(p);
        } catch (RuntimeException e) {
            throw mapError(e);
        }
        try {
            return produceWith(prod, topic, a, acks, !txn.isEmpty());
        } finally {
            prod.close(Duration.ofSeconds(2));
        }
    }

    ObjectNode produceWith(KafkaProducer<byte[], byte[]> prod, String topic, JsonNode a, int acks, boolean txn)
            throws DriverException {
        if (txn) {
            try {
                prod.initTransactions();
                prod.beginTransaction();
            } catch (RuntimeException e) {
                throw mapError(e);
            }
        }
        JsonNode records = a.path("records");
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        List<DriverException> sendErrors = new ArrayList<>();
        for (JsonNode r : records) {
            int part = r.path("partition").asInt(0);
            long ts = r.path("timestamp_ms").asLong(0);
            List<Header> headers = new ArrayList<>();
            for (JsonNode h : r.path("headers")) {
                headers.add(new RecordHeader(h.path("key").asText(), bytes(h.get("value"))));
            }
            ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(topic, part < 0 ? null : part,
                ts == 0 ? null : ts, bytes(r.get("key")), bytes(r.get("value")), headers);
            try {
                futures.add(prod.send(rec));
                sendErrors.add(null);
            } catch (RuntimeException e) {
                futures.add(null);
                sendErrors.add(mapError(e));
            }
        }
        try {
            prod.flush();
        } catch (RuntimeException e) {
            // Each record's future carries its own outcome, read below.
        }
        ArrayNode out = JSON.createArrayNode();
        boolean failed = false;
        int i = 0;
        for (JsonNode r : records) {
            ObjectNode d = out.addObject();
            Future<RecordMetadata> f = futures.get(i);
            DriverException err = sendErrors.get(i);
            i++;
            if (err == null) {
                try {
                    RecordMetadata md = f.get(DELIVERY_TIMEOUT_MS + 5_000L, TimeUnit.MILLISECONDS);
                    d.put("partition", md.partition());
                    d.put("offset", acks == 0 || !md.hasOffset() ? -1 : md.offset());
                    continue;
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    err = new DriverException("CLIENT_ERROR", "interrupted");
                } catch (Exception e) {
                    err = mapError(e);
                }
            }
            failed = true;
            d.put("partition", r.path("partition").asInt(0));
            d.put("offset", -1);
            d.set("error", err.toJson());
        }
        if (txn) {
            try {
                if (failed || a.path("txn_abort").asBoolean(false)) {
                    prod.abortTransaction();
                } else {
                    prod.commitTransaction();
                }
            } catch (RuntimeException e) {
                throw mapError(e);
            }
        }
        ObjectNode n = JSON.createObjectNode();
        n.set("deliveries", out);
        return n;
    }

    ObjectNode consume(JsonNode a) throws DriverException {
        String reset = a.path("reset").asText("");
        if (reset.isEmpty()) {
            reset = "none";
        }
        String isolation = a.path("isolation").asText("");
        if (isolation.isEmpty()) {
            isolation = "read_uncommitted";
        }
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "matrix-java-consumer");
        p.putAll(sec);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, reset);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.CLIENT_RACK_CONFIG, a.path("rack").asText(""));
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 200);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, REQUEST_TIMEOUT_MS);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, REQUEST_TIMEOUT_MS);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        KafkaConsumer<byte[], byte[]> c;
        try {
            c = new KafkaConsumer<>(p);
        } catch (RuntimeException e) {
            throw mapError(e);
        }
        try {
            return consumeWith(c, a);
        } finally {
            c.close(Duration.ofSeconds(2));
        }
    }

    ObjectNode consumeWith(KafkaConsumer<byte[], byte[]> c, JsonNode a) throws DriverException {
        TopicPartition tp = new TopicPartition(text(a, "topic"), a.path("partition").asInt(0));
        int count = a.path("count").asInt(0);
        long from = a.path("from").asLong(-2);
        ObjectNode n = JSON.createObjectNode();
        ArrayNode recs = n.putArray("records");
        n.put("high_watermark", -1);
        try {
            c.assign(List.of(tp));
            if (from == -2) {
                c.seekToBeginning(List.of(tp));
            } else if (from == -1) {
                c.seekToEnd(List.of(tp));
            } else {
                c.seek(tp, from);
            }
            long deadline = System.nanoTime() + a.path("timeout_ms").asLong(10_000) * 1_000_000L;
            while (recs.size() < count) {
                long left = (deadline - System.nanoTime()) / 1_000_000L;
                if (left <= 0) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(Math.min(left, 200)))) {
                    if (recs.size() >= count) {
                        break; // The next command starts its own consumer; extras are dropped.
                    }
                    recordJson(recs, r);
                }
            }
        } catch (RuntimeException e) {
            DriverException err = mapError(e);
            if (err.code.startsWith("CLIENT_")) {
                throw err;
            }
            n.set("error", err.toJson()); // A Kafka error such as OFFSET_OUT_OF_RANGE ends the command.
            return n;
        }
        try {
            // The end offset at the consumer's isolation level: the high
            // watermark for read_uncommitted, the last stable offset for
            // read_committed.
            Long end = c.endOffsets(List.of(tp), Duration.ofSeconds(2)).get(tp);
            if (end != null) {
                n.put("high_watermark", end);
            }
        } catch (RuntimeException e) {
            // Optional in the result: -1 says unknown.
        }
        return n;
    }

    ObjectNode listOffsets(JsonNode a) throws DriverException {
        TopicPartition tp = new TopicPartition(text(a, "topic"), a.path("partition").asInt(0));
        OffsetSpec spec;
        switch (a.path("kind").asText()) {
            case "earliest":
                spec = OffsetSpec.earliest();
                break;
            case "latest":
                spec = OffsetSpec.latest();
                break;
            case "timestamp":
                spec = OffsetSpec.forTimestamp(a.path("timestamp_ms").asLong());
                break;
            case "max_timestamp":
                spec = OffsetSpec.maxTimestamp(); // KIP-734
                break;
            default:
                throw new DriverException("CLIENT_ERROR", "unknown list_offsets kind " + a.path("kind"));
        }
        long off = await(admin().listOffsets(Map.of(tp, spec)).partitionResult(tp)).offset();
        ObjectNode n = JSON.createObjectNode();
        n.put("offset", off);
        return n;
    }

    ObjectNode deleteRecords(JsonNode a) throws DriverException {
        TopicPartition tp = new TopicPartition(text(a, "topic"), a.path("partition").asInt(0));
        long before = a.path("before").asLong();
        long low = await(admin().deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(before)))
            .lowWatermarks().get(tp)).lowWatermark();
        ObjectNode n = JSON.createObjectNode();
        n.put("low_watermark", low);
        return n;
    }

    /** The classic client-side assignors by the protocol's names. */
    static final Map<String, String> ASSIGNORS = Map.of(
        "range", RangeAssignor.class.getName(),
        "roundrobin", RoundRobinAssignor.class.getName(),
        "sticky", StickyAssignor.class.getName(),
        "cooperative-sticky", CooperativeStickyAssignor.class.getName());

    static ObjectNode recordJson(ArrayNode into, ConsumerRecord<byte[], byte[]> r) {
        ObjectNode o = into.addObject();
        o.put("partition", r.partition());
        o.put("offset", r.offset());
        o.put("key", b64(r.key()));
        o.put("value", b64(r.value()));
        o.put("timestamp_ms", r.timestamp());
        ArrayNode hs = JSON.createArrayNode();
        for (Header h : r.headers()) {
            ObjectNode ho = hs.addObject();
            ho.put("key", h.key());
            ho.put("value", b64(h.value()));
        }
        if (!hs.isEmpty()) {
            o.set("headers", hs);
        }
        return o;
    }

    ObjectNode groupConsume(JsonNode a) throws DriverException {
        String protocol = a.path("protocol").asText("");
        if (protocol.isEmpty()) {
            protocol = "classic";
        }
        if (!protocol.equals("classic") && !protocol.equals("consumer")) {
            throw new DriverException("CLIENT_ERROR", "unknown group protocol " + protocol);
        }
        String regex = a.path("topic_regex").asText("");
        if (!regex.isEmpty() && !protocol.equals("consumer")) {
            throw new DriverException("CLIENT_ERROR", "topic_regex needs protocol \"consumer\", not " + protocol);
        }
        if (!regex.isEmpty() && a.path("commit").asBoolean(false)) {
            throw new DriverException("CLIENT_ERROR", "topic_regex cannot commit: the records do not say their topic");
        }
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "matrix-java-group");
        p.putAll(sec);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, text(a, "group"));
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol); // "consumer" is KIP-848.
        // With auto-commit the consumer commits the positions after the
        // records poll returned, in later polls and in close; the command
        // then returns every record poll returned, even past count.
        int autoCommitMs = a.path("auto_commit_interval_ms").asInt(0);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, autoCommitMs > 0);
        if (autoCommitMs > 0) {
            p.put(ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG, autoCommitMs);
            // Poll returns at most count records, so that the consumer
            // holds fetched records it has not returned.
            p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Math.max(a.path("count").asInt(1), 1));
        }
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 200);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, REQUEST_TIMEOUT_MS);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, REQUEST_TIMEOUT_MS);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        String assignor = a.path("assignor").asText("");
        if (!assignor.isEmpty() && protocol.equals("classic")) {
            String cls = ASSIGNORS.get(assignor);
            if (cls == null) {
                throw unsupported("kafka-clients has no " + assignor + " assignor");
            }
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, cls);
        }
        String instance = a.path("instance_id").asText("");
        if (!instance.isEmpty()) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instance);
        }
        int session = a.path("session_timeout_ms").asInt(0);
        if (session > 0) {
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, session);
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, Math.max(session / 4, 1));
        }
        boolean crash = a.path("crash").asBoolean(false);
        KafkaConsumer<byte[], byte[]> c;
        try {
            c = new KafkaConsumer<>(p);
        } catch (RuntimeException e) {
            throw mapError(e);
        }
        String topic = regex.isEmpty() ? text(a, "topic") : "";
        int count = a.path("count").asInt(0);
        ObjectNode n = JSON.createObjectNode();
        ArrayNode recs = n.putArray("records");
        try {
            if (regex.isEmpty()) {
                c.subscribe(List.of(topic));
            } else {
                // KIP-848: the broker resolves the regex (RE2/J).
                c.subscribe(new SubscriptionPattern(regex));
            }
            long deadline = System.nanoTime() + a.path("timeout_ms").asLong(10_000) * 1_000_000L;
            // Next offset per partition after the records returned: what the
            // member commits, not its fetch position (it may have fetched more).
            Map<Integer, Long> next = new TreeMap<>();
            while (recs.size() < count) {
                long left = (deadline - System.nanoTime()) / 1_000_000L;
                if (left <= 0) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(Math.min(left, 200)))) {
                    if (recs.size() >= count && autoCommitMs <= 0) {
                        break;
                    }
                    recordJson(recs, r);
                    next.merge(r.partition(), r.offset() + 1, Math::max);
                }
            }
            if (a.path("commit").asBoolean(false) && !next.isEmpty()) {
                Map<TopicPartition, OffsetAndMetadata> offs = new HashMap<>();
                ArrayNode committed = n.putArray("committed");
                for (Map.Entry<Integer, Long> e : next.entrySet()) {
                    offs.put(new TopicPartition(topic, e.getKey()), new OffsetAndMetadata(e.getValue()));
                    ObjectNode po = committed.addObject();
                    po.put("partition", e.getKey());
                    po.put("offset", e.getValue());
                }
                commitThroughRebalance(c, offs);
            }
        } catch (RuntimeException e) {
            crash = false;
            throw mapError(e);
        } finally {
            if (crash) {
                abandoned.add(c); // Neither closed nor left: the orchestrator kills the process.
            } else {
                c.close(Duration.ofSeconds(5)); // Leaves the group, except for a static member.
            }
        }
        return n;
    }

    /**
     * commitThroughRebalance commits offs as an application following the
     * consumer's documentation does: a commit refused with
     * RebalanceInProgressException (the group is rebalancing, for instance
     * because another member is leaving at the same moment) is retried after
     * poll() has completed the rebalance, for up to ten seconds. Records that
     * poll returns meanwhile are not the member's: it commits offs only.
     */
    static void commitThroughRebalance(KafkaConsumer<byte[], byte[]> c, Map<TopicPartition, OffsetAndMetadata> offs) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (true) {
            try {
                c.commitSync(offs);
                return;
            } catch (RebalanceInProgressException e) {
                if (System.nanoTime() > deadline) {
                    throw e;
                }
                c.poll(Duration.ofMillis(100));
            }
        }
    }

    ObjectNode fetchCommitted(JsonNode a) throws DriverException {
        String group = text(a, "group");
        TopicPartition tp = new TopicPartition(text(a, "topic"), a.path("partition").asInt(0));
        Map<TopicPartition, OffsetAndMetadata> res = await(admin().listConsumerGroupOffsets(
            Map.of(group, new ListConsumerGroupOffsetsSpec().topicPartitions(List.of(tp))))
            .partitionsToOffsetAndMetadata(group));
        OffsetAndMetadata om = res.get(tp);
        ObjectNode n = JSON.createObjectNode();
        n.put("offset", om == null ? -1 : om.offset());
        return n;
    }

    ObjectNode deleteGroup(JsonNode a) throws DriverException {
        await(admin().deleteConsumerGroups(List.of(text(a, "group"))).all());
        return JSON.createObjectNode();
    }

    /**
     * describeGroup describes a consumer group with Admin.describeConsumerGroups
     * (ConsumerGroupDescribe, falling back to DescribeGroups for a classic group).
     */
    ObjectNode describeGroup(JsonNode a) throws DriverException {
        String group = text(a, "group");
        ConsumerGroupDescription g = await(admin().describeConsumerGroups(List.of(group)).describedGroups().get(group));
        ObjectNode n = JSON.createObjectNode();
        n.put("group", g.groupId());
        n.put("state", g.groupState().toString());
        ArrayNode members = n.putArray("members");
        for (MemberDescription m : g.members()) {
            ObjectNode mn = members.addObject();
            mn.put("member_id", m.consumerId());
            mn.put("client_id", m.clientId());
            ArrayNode as = mn.putArray("assignment");
            for (TopicPartition tp : m.assignment().topicPartitions()) {
                as.addObject().put("topic", tp.topic()).put("partition", tp.partition());
            }
        }
        return n;
    }

    /** listGroups lists the cluster's groups with Admin.listGroups (KIP-1043). */
    ObjectNode listGroups(JsonNode a) throws DriverException {
        Collection<GroupListing> gs = await(admin().listGroups().all());
        ObjectNode n = JSON.createObjectNode();
        ArrayNode out = n.putArray("groups");
        gs.stream().map(GroupListing::groupId).sorted().forEach(out::add);
        return n;
    }

    ObjectNode dispatch(String op, JsonNode args) throws DriverException {
        switch (op) {
            case "create_topic":
                return createTopic(args);
            case "delete_topic":
                return deleteTopic(args);
            case "describe_topic":
                return describeTopic(args);
            case "create_partitions":
                return createPartitions(args);
            case "describe_configs":
                return describeConfigs(args);
            case "alter_configs":
                return alterConfigs(args);
            case "produce":
                return produce(args);
            case "consume":
                return consume(args);
            case "list_offsets":
                return listOffsets(args);
            case "delete_records":
                return deleteRecords(args);
            case "group_consume":
                return groupConsume(args);
            case "fetch_committed":
                return fetchCommitted(args);
            case "delete_group":
                return deleteGroup(args);
            case "describe_group":
                return describeGroup(args);
            case "list_groups":
                return listGroups(args);
            case "transform":
                return txn.transform(args);
            case "producer_open":
                return txn.producerOpen(args);
            case "producer_send":
                return txn.producerSend(args);
            case "producer_close":
                return txn.producerClose(args);
            default:
                throw unsupported("unknown operation " + op);
        }
    }

    /** Serve reads commands from in and answers on out until close or end of input. */
    static void serve(BufferedReader in, Writer out) throws Exception {
        Driver d = null;
        try {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) {
                    continue;
                }
                JsonNode cmd = JSON.readTree(line);
                String op = cmd.path("op").asText();
                JsonNode args = cmd.path("args");
                ObjectNode resp = JSON.createObjectNode();
                resp.set("id", cmd.get("id"));
                try {
                    ObjectNode result;
                    if (op.equals("close")) {
                        result = JSON.createObjectNode();
                    } else if (op.equals("hello")) {
                        if (d != null) {
                            throw new DriverException("CLIENT_ERROR", "hello sent twice");
                        }
                        if (args.path("protocol").asInt() != PROTOCOL) {
                            throw new DriverException("CLIENT_ERROR", "protocol " + args.path("protocol")
                                + " requested, this driver speaks " + PROTOCOL);
                        }
                        d = new Driver(args.path("bootstrap").asText(), args.path("security"));
                        result = JSON.createObjectNode();
                        result.put("client", CLIENT);
                        result.put("protocol", PROTOCOL);
                        result.setAll(d.info());
                    } else if (d == null) {
                        throw new DriverException("CLIENT_ERROR", op + " before hello");
                    } else {
                        result = d.dispatch(op, args);
                    }
                    resp.put("ok", true);
                    resp.set("result", result);
                } catch (DriverException e) {
                    resp.put("ok", false);
                    resp.set("error", e.toJson());
                } catch (RuntimeException e) {
                    // A driver bug answers the command; it does not end the run.
                    e.printStackTrace();
                    resp.put("ok", false);
                    resp.set("error", new DriverException("CLIENT_ERROR", e.toString()).toJson());
                }
                out.write(JSON.writeValueAsString(resp));
                out.write('\n');
                out.flush();
                if (op.equals("close")) {
                    return;
                }
            }
        } finally {
            if (d != null) {
                d.close();
            }
        }
    }

    public static void main(String[] argv) throws Exception {
        // stdout carries protocol lines only: keep a private stream on file
        // descriptor 1 and send System.out (anything a library prints) to stderr.
        Writer out = new OutputStreamWriter(new FileOutputStream(FileDescriptor.out), StandardCharsets.UTF_8);
        System.setOut(new PrintStream(new FileOutputStream(FileDescriptor.err), true, StandardCharsets.UTF_8));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        serve(in, out);
        out.flush();
        System.exit(0); // Client threads (admin, metrics) must not keep the JVM alive.
    }
}
