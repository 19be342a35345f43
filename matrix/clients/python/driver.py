#!/usr/bin/env python3
"""Matrix driver for the Python Kafka clients.

One long-lived program serving either python-confluent-kafka (librdkafka) or
python-kafka-python, chosen by its one argument. It speaks the line-delimited
JSON driver protocol of matrix/README.md ("Driver protocol"): one command per
line on stdin, one answer per line on stdout, logs on stderr. Every operation
uses the client library's own producer, consumer and admin APIs.

    python3 driver.py python-confluent-kafka
    python3 driver.py python-kafka-python

The Go package github.com/cascade-kafka/cascade/matrix/clients/python creates
the virtualenv (requirements.txt) and starts this program.
"""

import json
import logging
import os
import re
import sys

from driver_common import (DELIVERY_TIMEOUT_S, KAFKA_ERRORS, PROTOCOL, REQUEST_TIMEOUT_S, Deadline, DriverError,
                           check_topic_regex,
                           b64encode, end_transaction, kafka_code_name, next_offsets, produce_args,
                           record_in, record_out, short, unsupported)
from driver_txn import ConfluentTxn, KafkaPythonTxn

# --- confluent-kafka ---------------------------------------------------------


def confluent_security(sec):
    """librdkafka's configs for hello's security (driver.Security): the
    protocol, SASL mechanism and credentials, and PEM material for TLS."""
    if not sec or not sec.get("protocol"):
        return {}
    conf = {"security.protocol": sec["protocol"]}
    if sec["protocol"].startswith("SASL_"):
        conf.update({"sasl.mechanisms": sec.get("mechanism", ""), "sasl.username": sec.get("username", ""),
                     "sasl.password": sec.get("password", "")})
    if sec["protocol"] in ("SSL", "SASL_SSL"):
        conf["ssl.ca.pem"] = sec.get("ca_pem", "")
        if sec.get("cert_pem"):
            conf.update({"ssl.certificate.pem": sec["cert_pem"], "ssl.key.pem": sec.get("key_pem", "")})
    return conf


def kafka_python_security(sec):
    """kafka-python's arguments for hello's security: it takes TLS material
    as files only, so the PEM strings are written to a private directory."""
    if not sec or not sec.get("protocol"):
        return {}
    conf = {"security_protocol": sec["protocol"]}
    if sec["protocol"].startswith("SASL_"):
        conf.update({"sasl_mechanism": sec.get("mechanism", ""), "sasl_plain_username": sec.get("username", ""),
                     "sasl_plain_password": sec.get("password", "")})
    if sec["protocol"] in ("SSL", "SASL_SSL"):
        import tempfile
        d = tempfile.mkdtemp(prefix="matrix-py-tls-")

        def write(name, text):
            path = os.path.join(d, name)
            with open(path, "w") as f:
                f.write(text)
            return path
        conf.update({"ssl_cafile": write("ca.pem", sec.get("ca_pem", "")), "ssl_check_hostname": True})
        if sec.get("cert_pem"):
            conf.update({"ssl_certfile": write("cert.pem", sec["cert_pem"]),
                         "ssl_keyfile": write("key.pem", sec.get("key_pem", ""))})
    return conf


class ConfluentDriver(ConfluentTxn):
    """python-confluent-kafka: librdkafka through confluent_kafka."""

    CLIENT = "python-confluent-kafka"

    def __init__(self, bootstrap, security=None):
        import confluent_kafka
        from confluent_kafka.admin import AdminClient

        self.ck = confluent_kafka
        self.bootstrap = bootstrap
        self.sec = confluent_security(security)
        if self.sec:
            self.check_authentication()
        self.admin = AdminClient(dict({"bootstrap.servers": bootstrap, "client.id": "matrix-py-confluent"}, **self.sec))

    def check_authentication(self):
        """librdkafka reports a failed authentication only to error_cb and
        retries: a probe producer reads the metadata (or times out) and the
        first authentication error seen is raised, as _AUTHENTICATION or
        _SSL."""
        seen = []

        def on_error(err):
            if err.code() in (self.ck.KafkaError._AUTHENTICATION, self.ck.KafkaError._SSL) or (
                    err.code() == self.ck.KafkaError._TRANSPORT and
                    ("alert certificate required" in err.str() or "alert bad certificate" in err.str())):
                seen.append(err)
        p = self.ck.Producer(dict({"bootstrap.servers": self.bootstrap, "client.id": "matrix-py-confluent-probe",
                                   "error_cb": on_error}, **self.sec))
        try:
            p.list_topics(timeout=5)
        except self.ck.KafkaException as e:
            p.poll(1)  # error_cb runs only from poll
            if not seen:
                raise self.error(e)
        if seen:
            code = "_SSL" if seen[0].code() != self.ck.KafkaError._AUTHENTICATION else "_AUTHENTICATION"
            raise DriverError(code, seen[0].str())

    def info(self):
        return {"library": "confluent-kafka %s (librdkafka %s)" % (self.ck.__version__, self.ck.libversion()[0]),
                "partitioner": "consistent_random (librdkafka: crc32 of the key)"}

    def close(self):
        self.close_producers()  # AdminClient has no close; its threads end with the process.

    def error(self, err):
        """Maps a KafkaError (or a KafkaException carrying one) to DriverError."""
        ke = err
        if isinstance(err, self.ck.KafkaException) and err.args and isinstance(err.args[0], self.ck.KafkaError):
            ke = err.args[0]
        if not isinstance(ke, self.ck.KafkaError):
            return DriverError("CLIENT_ERROR", short("%s: %s" % (type(err).__name__, err)))
        code, text = ke.code(), ke.str()
        if code >= 0:
            return DriverError(kafka_code_name(code), text)
        KE = self.ck.KafkaError
        if code == KE._UNKNOWN_TOPIC:
            return DriverError("CLIENT_UNKNOWN_TOPIC", text)
        if code in (KE._MSG_TIMED_OUT, KE._TIMED_OUT):
            return DriverError("CLIENT_TIMEOUT", text)
        if code == KE._UNKNOWN_PARTITION:
            return DriverError("CLIENT_UNKNOWN_PARTITION", text)
        if code == KE._FENCED:
            # librdkafka's fatal error for a producer whose epoch a newer
            # instance bumped, as Java's ProducerFencedException.
            return DriverError("PRODUCER_FENCED", text)
        if code == KE._AUTO_OFFSET_RESET:
            # auto.offset.reset=error: the broker answered OFFSET_OUT_OF_RANGE
            # and librdkafka was told not to reset.
            if "out of range" in text.lower():
                return DriverError("OFFSET_OUT_OF_RANGE", text)
            return DriverError("CLIENT_AUTO_OFFSET_RESET", text)
        return DriverError("CLIENT_" + ke.name().lstrip("_"), text)

    def _one(self, futures):
        """Waits for the single future of an admin call."""
        (f,) = futures.values()
        try:
            return f.result(timeout=REQUEST_TIMEOUT_S + 5)
        except self.ck.KafkaException as e:
            raise self.error(e)

    def create_topic(self, args):
        from confluent_kafka.admin import NewTopic
        nt = NewTopic(args["topic"], num_partitions=args.get("partitions", -1),
                      replication_factor=args.get("replication_factor", -1), config=args.get("configs") or {})
        self._one(self.admin.create_topics([nt], request_timeout=REQUEST_TIMEOUT_S))
        return {}

    def delete_topic(self, args):
        self._one(self.admin.delete_topics([args["topic"]], request_timeout=REQUEST_TIMEOUT_S))
        return {}

    def describe_topic(self, args):
        topic = args["topic"]
        td = self._one(self.admin.describe_topics(self.ck.TopicCollection([topic]), request_timeout=REQUEST_TIMEOUT_S))
        return {"topic": topic, "partitions": len(td.partitions)}

    def create_partitions(self, args):
        from confluent_kafka.admin import NewPartitions
        self._one(self.admin.create_partitions([NewPartitions(args["topic"], args["total"])],
                                               request_timeout=REQUEST_TIMEOUT_S))
        return {}

    def describe_configs(self, args):
        from confluent_kafka.admin import ConfigResource, ResourceType
        entries = self._one(self.admin.describe_configs([ConfigResource(ResourceType.TOPIC, args["topic"])],
                                                        request_timeout=REQUEST_TIMEOUT_S))
        return {"configs": {k: e.value for k, e in entries.items() if e.value is not None}}

    def alter_configs(self, args):
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
        ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in (args.get("set") or {}).items()]
        ops += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in (args.get("delete") or [])]
        res = ConfigResource(ResourceType.TOPIC, args["topic"], incremental_configs=ops)
        self._one(self.admin.incremental_alter_configs([res], request_timeout=REQUEST_TIMEOUT_S))
        return {}

    def produce(self, args):
        codec, acks = produce_args(args)
        conf = {
            "bootstrap.servers": self.bootstrap,
            "client.id": "matrix-py-confluent-producer",
            "acks": acks,
            "enable.idempotence": bool(args.get("idempotent")),
            "compression.type": codec,
            "message.timeout.ms": DELIVERY_TIMEOUT_S * 1000,
            "topic.metadata.propagation.max.ms": 2000,
            "message.max.bytes": 16 << 20,  # Leave the size limit to the broker.
            "allow.auto.create.topics": bool(args.get("auto_create")),
            **self.sec,
        }
        if args.get("max_in_flight"):
            conf["max.in.flight.requests.per.connection"] = args["max_in_flight"]
        if args.get("linger_ms"):
            conf["linger.ms"] = args["linger_ms"]
        txn = args.get("transactional_id")
        if txn:
            conf["transactional.id"] = txn
        p = self.ck.Producer(conf)
        try:
            res = self._produce(p, args, acks, txn)
        except DriverError:
            # The command failed with the error it reports; a producer
            # that failed fatally raises that error again from flush,
            # which must not replace it.
            try:
                p.flush(1)
            except (self.ck.KafkaException, SystemError):
                pass
            raise
        p.flush(1)  # Nothing is left: every record was reported.
        return res

    def _produce(self, p, args, acks, txn):
        records = args.get("records") or []
        topic = args["topic"]
        deliveries = [None] * len(records)
        if txn:
            try:
                p.init_transactions(REQUEST_TIMEOUT_S)
                p.begin_transaction()
            except self.ck.KafkaException as e:
                raise self.error(e)

        def on_delivery(i):
            def cb(err, msg):
                if err is not None:
                    deliveries[i] = {"partition": msg.partition(), "offset": -1, "error": self.error(err).to_json()}
                else:
                    off = msg.offset()
                    deliveries[i] = {"partition": msg.partition(), "offset": off if acks != 0 and off >= 0 else -1}
            return cb

        dl = Deadline(DELIVERY_TIMEOUT_S + 5)
        for i, r in enumerate(records):
            part, key, value, headers, ts = record_in(r)
            kw = {"key": key, "value": value, "on_delivery": on_delivery(i)}
            if part >= 0:
                kw["partition"] = part
            if headers:
                kw["headers"] = headers
            if ts:
                kw["timestamp"] = ts
            while True:
                try:
                    p.produce(topic, **kw)
                    break
                except BufferError:  # The local queue is full: serve delivery reports.
                    if dl.left() == 0:
                        raise DriverError("CLIENT_TIMEOUT", "producer queue stayed full")
                    p.poll(0.1)
                except self.ck.KafkaException as e:
                    deliveries[i] = {"partition": part, "offset": -1, "error": self.error(e).to_json()}
                    break
        try:
            p.flush(dl.left())
        except SystemError as e:
            # A fatal producer error (an idempotent producer whose
            # InitProducerId is refused with CLUSTER_AUTHORIZATION_FAILED)
            # reaches Python as the KafkaException behind a SystemError
            # raised from the delivery callback flush was serving.
            if isinstance(e.__cause__, self.ck.KafkaException):
                raise self.error(e.__cause__)
            raise
        for i, d in enumerate(deliveries):
            if d is None:
                deliveries[i] = {"partition": records[i].get("partition", 0), "offset": -1,
                                 "error": {"code": "CLIENT_TIMEOUT", "message": "no delivery report"}}
        if txn:
            failed = any("error" in d for d in deliveries)
            try:
                end_transaction(failed, args, lambda: p.commit_transaction(REQUEST_TIMEOUT_S),
                                lambda: p.abort_transaction(REQUEST_TIMEOUT_S))
            except self.ck.KafkaException as e:
                raise self.error(e)
        return {"deliveries": deliveries}

    def consume(self, args):
        reset = args.get("reset") or "none"
        if reset == "none":
            reset = "error"  # librdkafka's name for "no reset: report it".
        c = self.ck.Consumer({
            **self.sec,
            "bootstrap.servers": self.bootstrap,
            "client.id": "matrix-py-confluent-consumer",
            "group.id": "matrix-py-confluent-unused",  # Required; no subscribe, no commits.
            "enable.auto.commit": False,
            "auto.offset.reset": reset,
            "isolation.level": args.get("isolation") or "read_uncommitted",
            "client.rack": args.get("rack") or "",
            "fetch.wait.max.ms": 200,
        })
        try:
            return self._consume(c, args)
        finally:
            c.close()

    def _consume(self, c, args):
        topic, part = args["topic"], args.get("partition", 0)
        count = args.get("count", 0)
        # OFFSET_BEGINNING is -2 and OFFSET_END -1, as in the protocol.
        c.assign([self.ck.TopicPartition(topic, part, args.get("from", -2))])
        out = {"records": [], "high_watermark": -1}
        dl = Deadline(args.get("timeout_ms", 10000) / 1000.0)
        while len(out["records"]) < count and dl.left() > 0:
            msg = c.poll(min(dl.left(), 0.1))
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.fatal() or err.code() >= 0 or err.code() == self.ck.KafkaError._AUTO_OFFSET_RESET:
                    out["error"] = self.error(err).to_json()
                    return out
                continue  # Other local errors are informational; librdkafka retries.
            _, ts = msg.timestamp()
            out["records"].append(record_out(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                             msg.headers(), ts))
        try:
            _, high = c.get_watermark_offsets(self.ck.TopicPartition(topic, part), timeout=2, cached=False)
            out["high_watermark"] = high
        except self.ck.KafkaException:
            pass  # The watermark is optional in the result: -1 says unknown.
        return out

    def list_offsets(self, args):
        from confluent_kafka.admin import OffsetSpec
        kind = args.get("kind")
        if kind == "earliest":
            spec = OffsetSpec.earliest()
        elif kind == "latest":
            spec = OffsetSpec.latest()
        elif kind == "timestamp":
            spec = OffsetSpec.for_timestamp(args.get("timestamp_ms", 0))
        elif kind == "max_timestamp":
            spec = OffsetSpec.max_timestamp()  # KIP-734
        else:
            raise DriverError("CLIENT_ERROR", "unknown list_offsets kind %r" % kind)
        tp = self.ck.TopicPartition(args["topic"], args.get("partition", 0))
        info = self._one(self.admin.list_offsets({tp: spec}, request_timeout=REQUEST_TIMEOUT_S))
        return {"offset": info.offset}

    def delete_records(self, args):
        tp = self.ck.TopicPartition(args["topic"], args.get("partition", 0), args["before"])
        res = self._one(self.admin.delete_records([tp], request_timeout=REQUEST_TIMEOUT_S))
        return {"low_watermark": res.low_watermark}

    # librdkafka's classic assignors (partition.assignment.strategy); it has
    # no eager "sticky" assignor.
    ASSIGNORS = {"range": "range", "roundrobin": "roundrobin", "cooperative-sticky": "cooperative-sticky"}

    def group_consume(self, args):
        conf = {
            "bootstrap.servers": self.bootstrap,
            "client.id": "matrix-py-confluent-group",
            "group.id": args["group"],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 200,
        }
        if args.get("auto_commit_interval_ms"):
            # librdkafka auto-commits stored offsets; an offset is stored as
            # poll returns its message (enable.auto.offset.store=true).
            conf["enable.auto.commit"] = True
            conf["auto.commit.interval.ms"] = args["auto_commit_interval_ms"]
        protocol, assignor = args.get("protocol") or "classic", args.get("assignor")
        if protocol == "classic":
            if assignor:
                if assignor not in self.ASSIGNORS:
                    raise unsupported("librdkafka has no %s assignor" % assignor)
                conf["partition.assignment.strategy"] = self.ASSIGNORS[assignor]
        elif protocol == "consumer":
            conf["group.protocol"] = "consumer"  # KIP-848, librdkafka 2.4+.
        else:
            raise DriverError("CLIENT_ERROR", "unknown group protocol %r" % protocol)
        if args.get("instance_id"):
            conf["group.instance.id"] = args["instance_id"]
        if args.get("session_timeout_ms"):
            conf["session.timeout.ms"] = args["session_timeout_ms"]
            conf["heartbeat.interval.ms"] = max(args["session_timeout_ms"] // 4, 1)
        check_topic_regex(args, protocol)
        conf.update(self.sec)
        c = self.ck.Consumer(conf)
        closed = False
        try:
            topic, count = args.get("topic", ""), args.get("count", 0)
            if args.get("topic_regex"):
                topic = "^" + args["topic_regex"]  # librdkafka's mark of a regex subscription
            c.subscribe([topic])
            out = {"records": []}
            dl = Deadline(args.get("timeout_ms", 10000) / 1000.0)
            while len(out["records"]) < count and dl.left() > 0:
                msg = c.poll(min(dl.left(), 0.1))
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.fatal() or err.code() >= 0:
                        raise self.error(err)
                    continue
                _, ts = msg.timestamp()
                out["records"].append(record_out(msg.partition(), msg.offset(), msg.key(), msg.value(),
                                                 msg.headers(), ts))
            if args.get("commit") and out["records"]:
                nxt = next_offsets(out["records"])
                try:
                    done = c.commit(offsets=[self.ck.TopicPartition(topic, p, o) for p, o in nxt], asynchronous=False)
                except self.ck.KafkaException as e:
                    raise self.error(e)
                for tp in done or []:
                    if tp.error is not None:
                        raise self.error(tp.error)
                out["committed"] = [{"partition": p, "offset": o} for p, o in nxt]
            closed = True
            if args.get("crash"):
                # Neither closed nor left: the orchestrator kills the process.
                self.abandoned = getattr(self, "abandoned", []) + [c]
                return out
            c.close()  # Leaves the group, except for a static member.
            return out
        finally:
            if not closed:
                c.close()

    def fetch_committed(self, args):
        from confluent_kafka import ConsumerGroupTopicPartitions
        req = ConsumerGroupTopicPartitions(args["group"], [self.ck.TopicPartition(args["topic"], args.get("partition", 0))])
        res = self._one(self.admin.list_consumer_group_offsets([req], request_timeout=REQUEST_TIMEOUT_S))
        for tp in res.topic_partitions:
            if tp.error is not None:
                raise self.error(tp.error)
            return {"offset": tp.offset if tp.offset >= 0 else -1}  # OFFSET_INVALID: nothing committed.
        raise DriverError("CLIENT_ERROR", "list_consumer_group_offsets result lacks the partition")

    def delete_group(self, args):
        self._one(self.admin.delete_consumer_groups([args["group"]], request_timeout=REQUEST_TIMEOUT_S))
        return {}

    # Kafka's names of the group states (org.apache.kafka.common.GroupState)
    # for confluent-kafka's ConsumerGroupState members.
    GROUP_STATES = {"UNKNOWN": "Unknown", "PREPARING_REBALANCING": "PreparingRebalance",
                    "COMPLETING_REBALANCING": "CompletingRebalance", "STABLE": "Stable",
                    "DEAD": "Dead", "EMPTY": "Empty"}

    def describe_group(self, args):
        group = args["group"]
        g = self._one(self.admin.describe_consumer_groups([group], request_timeout=REQUEST_TIMEOUT_S))
        members = []
        for m in g.members:
            parts = [] if m.assignment is None else m.assignment.topic_partitions
            members.append({"member_id": m.member_id, "client_id": m.client_id,
                            "assignment": [{"topic": tp.topic, "partition": tp.partition} for tp in parts]})
        return {"group": g.group_id, "state": self.GROUP_STATES.get(g.state.name, g.state.name), "members": members}

    def list_groups(self, args):
        try:
            res = self.admin.list_consumer_groups(request_timeout=REQUEST_TIMEOUT_S).result(timeout=REQUEST_TIMEOUT_S + 5)
        except self.ck.KafkaException as e:
            raise self.error(e)
        if res.errors:
            raise self.error(res.errors[0])
        return {"groups": sorted(g.group_id for g in res.valid)}


# --- kafka-python ------------------------------------------------------------


class KafkaPythonDriver(KafkaPythonTxn):
    """python-kafka-python: the pure-Python kafka-python client."""

    CLIENT = "python-kafka-python"

    def __init__(self, bootstrap, security=None):
        import kafka
        import kafka.errors

        self.kafka = kafka
        self.errors = kafka.errors
        # kafka-python takes bootstrap_servers as a list of host:port
        # entries; a cluster target's bootstrap is a comma-separated list.
        self.bootstrap = [a.strip() for a in bootstrap.split(",") if a.strip()]
        self.sec = kafka_python_security(security)
        self._admin = None

    def admin(self):
        """Returns the admin client, connecting on first use so that hello
        does not need a reachable broker."""
        if self._admin is None:
            try:
                extra = dict(self.sec)
                if self.sec:
                    # A failed authentication is retried until the
                    # bootstrap times out (30 s by default).
                    extra["bootstrap_timeout_ms"] = 5000
                self._admin = self.kafka.KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="matrix-py-kafka",
                                                          request_timeout_ms=REQUEST_TIMEOUT_S * 1000, **extra)
            except self.errors.KafkaError as e:
                raise self.error(e)
        return self._admin

    def info(self):
        return {"library": "kafka-python %s" % self.kafka.__version__,
                "partitioner": "murmur2 (DefaultPartitioner, as the Java client)"}

    def close(self):
        self.close_producers()
        if self._admin is not None:
            self._admin.close()

    def error(self, e):
        """Maps a kafka-python exception to DriverError."""
        E = self.errors
        if isinstance(e, DriverError):
            return e
        errno = getattr(e, "errno", None)
        if isinstance(e, E.KafkaError) and isinstance(errno, int) and errno in KAFKA_ERRORS:
            return DriverError(KAFKA_ERRORS[errno], short(e))
        wrapped = re.search(r"\[Error (\d+)\] \w+Error", str(e))
        if isinstance(e, E.KafkaError) and wrapped and int(wrapped.group(1)) in KAFKA_ERRORS:
            # kafka-python reports some broker errors (InitProducerId's
            # CLUSTER_AUTHORIZATION_FAILED) as a plain KafkaError whose
            # message carries the broker's error: "Unexpected error in
            # InitProducerIdResponse: [Error 31] ClusterAuthorizationFailedError".
            return DriverError(KAFKA_ERRORS[int(wrapped.group(1))], short(e))
        if isinstance(e, E.KafkaTimeoutError):
            # send() waits max_block_ms for the topic's metadata; a topic
            # that never appears in metadata ends here.
            if "metadata" in str(e).lower():
                return DriverError("CLIENT_UNKNOWN_TOPIC", short(e))
            return DriverError("CLIENT_TIMEOUT", short(e))
        return DriverError("CLIENT_ERROR", short("%s: %s" % (type(e).__name__, e)))

    def _admin_call(self, f, *a, **kw):
        try:
            return f(*a, **kw)
        except (self.errors.KafkaError, ValueError) as e:
            raise self.error(e)

    def create_topic(self, args):
        spec = {"num_partitions": args.get("partitions", -1), "replication_factor": args.get("replication_factor", -1),
                "configs": args.get("configs") or {}}
        a = self.admin()
        self._admin_call(a.create_topics, {args["topic"]: spec}, timeout_ms=REQUEST_TIMEOUT_S * 1000)
        return {}

    def delete_topic(self, args):
        a = self.admin()
        self._admin_call(a.delete_topics, [args["topic"]], timeout_ms=REQUEST_TIMEOUT_S * 1000)
        return {}

    def describe_topic(self, args):
        a = self.admin()
        topic = args["topic"]
        for t in self._admin_call(a.describe_topics, [topic]):
            if t["name"] != topic:
                continue
            if t["error_code"]:
                raise DriverError(kafka_code_name(t["error_code"]), "describe_topics: topic %s" % topic)
            return {"topic": topic, "partitions": len(t["partitions"])}
        raise DriverError("UNKNOWN_TOPIC_OR_PARTITION", "topic absent from describe_topics result")

    def create_partitions(self, args):
        a = self.admin()
        self._admin_call(a.create_partitions, {args["topic"]: args["total"]}, timeout_ms=REQUEST_TIMEOUT_S * 1000)
        return {}

    def describe_configs(self, args):
        from kafka.admin import ConfigResource, ConfigResourceType
        a = self.admin()
        topic = args["topic"]
        res = self._admin_call(a.describe_configs, [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
        entries = res.get("topic", {}).get(topic, {})
        return {"configs": {k: e["value"] for k, e in entries.items() if e.get("value") is not None}}

    # alter_configs answers "OK" or the str() of the error, "[Error N] Name: message".
    _ALTER_ERROR = re.compile(r"^\[Error (-?\d+)\]")

    def alter_configs(self, args):
        from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
        a = self.admin()
        topic = args["topic"]
        ops = {k: (AlterConfigOp.SET, v) for k, v in (args.get("set") or {}).items()}
        ops.update({k: (AlterConfigOp.DELETE, None) for k in (args.get("delete") or [])})
        # raise_on_unknown=False: the broker, not a client-side list, judges keys.
        res = self._admin_call(a.alter_configs, [ConfigResource(ConfigResourceType.TOPIC, topic, configs=ops)],
                               raise_on_unknown=False, incremental=True)
        result = res.get("topic", {}).get(topic)
        if result == "OK":
            return {}
        m = self._ALTER_ERROR.match(str(result))
        if m:
            raise DriverError(kafka_code_name(int(m.group(1))), short(result))
        raise DriverError("CLIENT_ERROR", "alter_configs result for %s: %s" % (topic, short(result)))

    def produce(self, args):
        codec, acks = produce_args(args)
        records = args.get("records") or []
        for r in records:
            for h in r.get("headers") or []:
                if h.get("value") is None:
                    # KafkaProducer.send checks that headers are (str, bytes).
                    raise unsupported("kafka-python cannot produce a null header value "
                                      "(KafkaProducer.send requires (str, bytes) header tuples)")
        txn = args.get("transactional_id")
        conf = {
            **self.sec,
            "bootstrap_servers": self.bootstrap,
            "client_id": "matrix-py-kafka-producer",
            "acks": "all" if acks == -1 else acks,
            "compression_type": None if codec == "none" else codec,
            "enable_idempotence": bool(args.get("idempotent") or txn),
            "max_block_ms": 5000,
            "request_timeout_ms": REQUEST_TIMEOUT_S * 1000,
            "delivery_timeout_ms": DELIVERY_TIMEOUT_S * 1000,
            "max_request_size": 16 << 20,  # Leave the size limit to the broker.
            "allow_auto_create_topics": bool(args.get("auto_create")),
        }
        if args.get("max_in_flight"):
            conf["max_in_flight_requests_per_connection"] = args["max_in_flight"]
        if args.get("linger_ms"):
            conf["linger_ms"] = args["linger_ms"]
        if txn:
            conf["transactional_id"] = txn
        try:
            p = self.kafka.KafkaProducer(**conf)
        except self.errors.KafkaError as e:
            raise self.error(e)
        try:
            return self._produce(p, args, records, acks, txn)
        finally:
            p.close(timeout=2)

    def _produce(self, p, args, records, acks, txn):
        E = self.errors
        topic = args["topic"]
        try:
            if txn:
                p.init_transactions()
                p.begin_transaction()
        except E.KafkaError as e:
            raise self.error(e)
        futures = []
        for r in records:
            part, key, value, headers, ts = record_in(r)
            kw = {"key": key, "value": value, "headers": headers or None}
            if part >= 0:
                kw["partition"] = part
            if ts:
                kw["timestamp_ms"] = ts
            try:
                futures.append(p.send(topic, **kw))
            except E.KafkaError as e:
                futures.append(self.error(e))
        dl = Deadline(DELIVERY_TIMEOUT_S + 5)
        try:
            p.flush(timeout=dl.left())
        except E.KafkaError:
            pass  # Each record's future carries its own outcome, read below.
        deliveries = []
        for r, f in zip(records, futures):
            if isinstance(f, DriverError):
                deliveries.append({"partition": r.get("partition", 0), "offset": -1, "error": f.to_json()})
                continue
            try:
                md = f.get(timeout=dl.left())
            except Exception as e:  # The future raises the record's error.
                deliveries.append({"partition": r.get("partition", 0), "offset": -1, "error": self.error(e).to_json()})
                continue
            deliveries.append({"partition": md.partition, "offset": md.offset if acks != 0 and md.offset >= 0 else -1})
        if txn:
            failed = any("error" in d for d in deliveries)
            try:
                end_transaction(failed, args, p.commit_transaction, p.abort_transaction)
            except E.KafkaError as e:
                raise self.error(e)
        return {"deliveries": deliveries}

    def consume(self, args):
        E = self.errors
        reset = args.get("reset") or "none"
        if reset not in ("none", "earliest", "latest"):
            raise DriverError("CLIENT_ERROR", "unknown reset %r" % reset)
        try:
            c = self.kafka.KafkaConsumer(bootstrap_servers=self.bootstrap, client_id="matrix-py-kafka-consumer", **self.sec,
                                         group_id=None, enable_auto_commit=False, auto_offset_reset=reset,
                                         isolation_level=args.get("isolation") or "read_uncommitted",
                                         client_rack=args.get("rack") or "",
                                         fetch_max_wait_ms=200, request_timeout_ms=REQUEST_TIMEOUT_S * 1000)
        except E.KafkaError as e:
            raise self.error(e)
        try:
            return self._consume(c, args)
        finally:
            c.close()

    # How often a consume re-seeks after an OFFSET_OUT_OF_RANGE that the
    # partition's own offsets contradict (see _spurious_out_of_range).
    OUT_OF_RANGE_RETRIES = 3

    def _consume(self, c, args):
        E = self.errors
        tp = self.kafka.TopicPartition(args["topic"], args.get("partition", 0))
        count = args.get("count", 0)
        out = {"records": [], "high_watermark": -1}
        retries = self.OUT_OF_RANGE_RETRIES
        try:
            c.assign([tp])
            start = args.get("from", -2)
            if start == -2:
                c.seek_to_beginning(tp)
            elif start == -1:
                c.seek_to_end(tp)
            else:
                c.seek(tp, start)
            dl = Deadline(args.get("timeout_ms", 10000) / 1000.0)
            while len(out["records"]) < count and dl.left() > 0:
                try:
                    batch = c.poll(timeout_ms=int(min(dl.left(), 0.2) * 1000) + 1,
                                   max_records=count - len(out["records"]))
                except E.OffsetOutOfRangeError as e:
                    offset = self._spurious_out_of_range(c, tp, e)
                    if offset is None or retries == 0:
                        raise
                    retries -= 1
                    c.seek(tp, offset)
                    continue
                for rec in batch.get(tp, []):
                    out["records"].append(record_out(rec.partition, rec.offset, rec.key, rec.value,
                                                     rec.headers, rec.timestamp))
        except E.KafkaError as e:
            err = self.error(e)
            if err.code.startswith("CLIENT_"):
                raise err
            out["error"] = err.to_json()  # A Kafka error such as OFFSET_OUT_OF_RANGE ends the command.
            return out
        hw = c.highwater(tp)
        if hw is not None:
            out["high_watermark"] = hw
        return out

    def _spurious_out_of_range(self, c, tp, err):
        """Returns the fetch offset of an OFFSET_OUT_OF_RANGE error when the
        partition's current start and end offsets put it in range, else
        None. Against Apache Kafka, kafka-python once failed a fetch at
        offset 0 of a just-written partition this way; a fetch at an offset
        between the log start and end is answered with records, so such an
        error is re-tried at the same offset instead of reported. An offset
        really out of range (below the start, past the end) is reported."""
        offsets = err.args[0] if err.args and isinstance(err.args[0], dict) else {}
        offset = offsets.get(tp)
        if offset is None:
            return None
        start = c.beginning_offsets([tp], timeout_ms=REQUEST_TIMEOUT_S * 1000).get(tp)
        end = c.end_offsets([tp], timeout_ms=REQUEST_TIMEOUT_S * 1000).get(tp)
        if start is None or end is None or not start <= offset <= end:
            return None
        logging.warning("fetch of %s at offset %d answered OFFSET_OUT_OF_RANGE while the log spans [%d, %d]; "
                        "seeking to %d again", tp, offset, start, end, offset)
        return offset

    def list_offsets(self, args):
        from kafka.admin import OffsetSpec, OffsetTimestamp
        kind = args.get("kind")
        if kind == "earliest":
            spec = OffsetSpec.EARLIEST
        elif kind == "latest":
            spec = OffsetSpec.LATEST
        elif kind == "timestamp":
            spec = OffsetTimestamp(args.get("timestamp_ms", 0))
        elif kind == "max_timestamp":
            spec = OffsetSpec.MAX_TIMESTAMP  # KIP-734
        else:
            raise DriverError("CLIENT_ERROR", "unknown list_offsets kind %r" % kind)
        tp = self.kafka.TopicPartition(args["topic"], args.get("partition", 0))
        a = self.admin()
        res = self._admin_call(a.list_partition_offsets, {tp: spec}, timeout_ms=REQUEST_TIMEOUT_S * 1000)
        return {"offset": res[tp].offset}

    def delete_records(self, args):
        tp = self.kafka.TopicPartition(args["topic"], args.get("partition", 0))
        a = self.admin()
        res = self._admin_call(a.delete_records, {tp: args["before"]}, timeout_ms=REQUEST_TIMEOUT_S * 1000)
        return {"low_watermark": res[tp]["low_watermark"]}

    def group_consume(self, args):
        E = self.errors
        protocol, assignor = args.get("protocol") or "classic", args.get("assignor")
        if protocol == "consumer":
            raise unsupported("kafka-python has no KIP-848 consumer group protocol (group.protocol=consumer)")
        if protocol != "classic":
            raise DriverError("CLIENT_ERROR", "unknown group protocol %r" % protocol)
        conf = {"bootstrap_servers": self.bootstrap, "client_id": "matrix-py-kafka-group", "group_id": args["group"],
                "enable_auto_commit": False, "auto_offset_reset": "earliest", "fetch_max_wait_ms": 200,
                "request_timeout_ms": REQUEST_TIMEOUT_S * 1000}
        if args.get("auto_commit_interval_ms"):
            # kafka-python commits the positions of polled records, in poll
            # and in close (autocommit=True).
            conf["enable_auto_commit"] = True
            conf["auto_commit_interval_ms"] = args["auto_commit_interval_ms"]
        if assignor:
            conf["partition_assignment_strategy"] = (self._assignor(assignor),)
        if args.get("instance_id"):
            conf["group_instance_id"] = args["instance_id"]
        if args.get("session_timeout_ms"):
            conf["session_timeout_ms"] = args["session_timeout_ms"]
            conf["heartbeat_interval_ms"] = max(args["session_timeout_ms"] // 4, 1)
        conf.update(self.sec)
        try:
            c = self.kafka.KafkaConsumer(**conf)
        except E.KafkaError as e:
            raise self.error(e)
        try:
            topic, count = args["topic"], args.get("count", 0)
            out = {"records": []}
            # Fetch the topic's metadata before joining: a group leader whose
            # metadata lacks the topic assigns it to no one (kafka-python logs
            # "No partition metadata for topic") and may not rebalance again
            # within the command.
            c.partitions_for_topic(topic)
            c.subscribe([topic])
            dl = Deadline(args.get("timeout_ms", 10000) / 1000.0)
            while len(out["records"]) < count and dl.left() > 0:
                batch = c.poll(timeout_ms=int(min(dl.left(), 0.2) * 1000) + 1, max_records=count - len(out["records"]))
                for recs in batch.values():
                    for rec in recs:
                        out["records"].append(record_out(rec.partition, rec.offset, rec.key, rec.value,
                                                         rec.headers, rec.timestamp))
            if args.get("commit") and out["records"]:
                nxt = next_offsets(out["records"])
                self._commit_through_rebalance(c, {self.kafka.TopicPartition(topic, p): self.kafka.OffsetAndMetadata(o, "", -1)
                                                   for p, o in nxt})
                out["committed"] = [{"partition": p, "offset": o} for p, o in nxt]
            if args.get("crash"):
                # Neither closed nor left: the orchestrator kills the process.
                self.abandoned = getattr(self, "abandoned", []) + [c]
                c = None
            return out
        except E.KafkaError as e:
            raise self.error(e)
        finally:
            if c is not None:
                c.close()  # Leaves the group, except for a static member.

    def _commit_through_rebalance(self, c, offsets):
        """Commits offsets as an application following the consumer's
        documentation does: a commit refused because the group is
        rebalancing (another member leaving at the same moment, say) is
        retried after poll() has completed the rebalance, for up to thirty
        seconds (a rebalance waits for a departed member's session to
        lapse). Records that poll returns meanwhile are not the member's:
        it commits offsets only."""
        E = self.errors
        dl = Deadline(30.0)
        while True:
            try:
                c.commit(offsets)
                return
            except (E.RebalanceInProgressError, E.CommitFailedError):
                if dl.left() <= 0:
                    raise
                c.poll(timeout_ms=100)

    def _assignor(self, name):
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
        for cls in (RangePartitionAssignor, RoundRobinPartitionAssignor, StickyPartitionAssignor, CooperativeStickyAssignor):
            if cls.name == name:
                return cls
        raise unsupported("kafka-python has no %s assignor" % name)

    def fetch_committed(self, args):
        tp = self.kafka.TopicPartition(args["topic"], args.get("partition", 0))
        a = self.admin()
        res = self._admin_call(a.list_group_offsets, {args["group"]: [tp]})
        oam = res.get(args["group"], {}).get(tp)
        return {"offset": oam.offset if oam is not None and oam.offset >= 0 else -1}

    def delete_group(self, args):
        a = self.admin()
        group = args["group"]
        res = self._admin_call(a.delete_groups, [group]).get(group)
        if res == "OK":
            return {}
        # delete_groups answers the error class's name, e.g. GroupIdNotFoundError.
        cls = getattr(self.errors, str(res), None)
        if cls is not None and isinstance(getattr(cls, "errno", None), int):
            raise DriverError(kafka_code_name(cls.errno), "delete_groups: %s" % res)
        raise DriverError("CLIENT_ERROR", "delete_groups result for %s: %s" % (group, res))

    def describe_group(self, args):
        group = args["group"]
        a = self.admin()
        g = self._admin_call(a.describe_groups, [group]).get(group)
        if g is None:
            raise DriverError("CLIENT_ERROR", "describe_groups answered without group %s" % group)
        if g.get("error"):
            # describe_groups answers the error as "[Error <code>] <Name>: <message>".
            m = re.match(r"\[Error (\d+)\]", str(g["error"]))
            raise DriverError(kafka_code_name(int(m.group(1))) if m else "CLIENT_ERROR", "describe_groups: %s" % g["error"])
        members = []
        for m in g.get("members") or []:
            assigned = m.get("member_assignment")
            if isinstance(assigned, (bytes, bytearray, str)) and assigned:
                raise DriverError("CLIENT_ERROR", "describe_groups left the assignment of %s undecoded" % m.get("member_id"))
            if assigned and not isinstance(assigned, dict):
                assigned = assigned.to_dict()
            parts = []
            for t in (assigned or {}).get("assigned_partitions") or []:
                for p in t["partitions"]:
                    parts.append({"topic": t["topic"], "partition": p})
            members.append({"member_id": m.get("member_id"), "client_id": m.get("client_id"), "assignment": parts})
        return {"group": group, "state": g.get("group_state"), "members": members}

    def list_groups(self, args):
        a = self.admin()
        gs = self._admin_call(a.list_groups)
        return {"groups": sorted(set(g["group_id"] for g in gs))}


CLIENTS = {ConfluentDriver.CLIENT: ConfluentDriver, KafkaPythonDriver.CLIENT: KafkaPythonDriver}

OPS = ("create_topic", "delete_topic", "describe_topic", "create_partitions", "describe_configs",
       "alter_configs", "produce", "consume", "list_offsets", "delete_records", "group_consume",
       "fetch_committed", "delete_group", "describe_group", "list_groups", "transform", "producer_open", "producer_send", "producer_close")


def handle(client, state, cmd):
    """Runs one command and returns its result object; raises DriverError."""
    op, args = cmd.get("op"), cmd.get("args") or {}
    if op == "hello":
        if state.get("driver") is not None:
            raise DriverError("CLIENT_ERROR", "hello sent twice")
        if args.get("protocol") != PROTOCOL:
            raise DriverError("CLIENT_ERROR", "protocol %r requested, this driver speaks %d" % (args.get("protocol"), PROTOCOL))
        d = CLIENTS[client](args.get("bootstrap", ""), args.get("security"))
        state["driver"] = d
        return dict({"client": client, "protocol": PROTOCOL}, **d.info())
    d = state.get("driver")
    if op not in OPS:
        raise unsupported("unknown operation %r" % op)
    if d is None:
        raise DriverError("CLIENT_ERROR", "%s before hello" % op)
    return getattr(d, op)(args)


def serve(client, inp, out):
    """Reads commands from inp and writes answers to out until close or EOF."""
    state = {}
    try:
        for line in inp:
            if not line.strip():
                continue
            cmd = json.loads(line)
            resp = {"id": cmd.get("id"), "ok": True}
            if cmd.get("op") == "close":
                resp["result"] = {}
                out.write(json.dumps(resp, separators=(",", ":")) + "\n")
                out.flush()
                return
            try:
                resp["result"] = handle(client, state, cmd)
            except DriverError as e:
                resp = {"id": cmd.get("id"), "ok": False, "error": e.to_json()}
            except Exception as e:  # A driver bug answers the command, it does not kill the run.
                logging.exception("%s failed", cmd.get("op"))
                resp = {"id": cmd.get("id"), "ok": False,
                        "error": {"code": "CLIENT_ERROR", "message": short("%s: %s" % (type(e).__name__, e))}}
            out.write(json.dumps(resp, separators=(",", ":")) + "\n")
            out.flush()
    finally:
        d = state.get("driver")
        if d is not None:
            d.close()


def main(argv):
    if len(argv) != 2 or argv[1] not in CLIENTS:
        sys.stderr.write("usage: driver.py {%s}\n" % ",".join(sorted(CLIENTS)))
        return 2
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # stdout carries protocol lines only: keep a private handle on it and
    # point file descriptor 1 at stderr, so that nothing a library prints
    # (Python or C) can corrupt the stream.
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(argv[1], sys.stdin, proto)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
