"""Transactional operations of the Python matrix drivers: transform
(exactly-once consume-transform-produce) and the long-lived transactional
producers of producer_open, producer_send and producer_close. Each client's
class in driver.py takes these methods from its mixin here.
"""

import logging

from driver_common import (DELIVERY_TIMEOUT_S, REQUEST_TIMEOUT_S, Deadline, DriverError, next_offsets, record_in,
                           record_out)


def transform_args(args):
    """Validates the transform command and returns (count, batch)."""
    batch = args.get("batch") or 0
    if batch <= 0:
        raise DriverError("CLIENT_ERROR", "transform needs a positive batch")
    return args.get("count", 0), batch


def transform_loop(args, poll_batch, run_txn):
    """Runs transactions until count records were committed (and one more,
    aborted, when abort_last is set) or the command's timeout passed.
    poll_batch(want, deadline) returns up to want consumed records (protocol
    dicts, in order); run_txn(records, commit) produces their copies, sends
    their offsets to the transaction and ends it."""
    count, batch = transform_args(args)
    out = {"records": [], "transactions": 0}
    dl = Deadline(args.get("timeout_ms", 10000) / 1000.0)
    aborted = None
    while True:
        done = len(out["records"]) >= count
        if done and (not args.get("abort_last") or aborted is not None):
            break
        want = batch if done else min(batch, count - len(out["records"]))
        recs = poll_batch(want, dl)
        if not recs:
            break  # Timed out: the orchestrator sees the shortfall.
        run_txn(recs, not done)
        if done:
            aborted = recs
            continue
        out["records"].extend(recs)
        out["transactions"] += 1
        out["committed"] = [{"partition": p, "offset": o} for p, o in next_offsets(out["records"])]
    if aborted is not None:
        out["aborted"] = aborted
    return out


class ProducerHandles:
    """The producers of producer_open, by the orchestrator's names."""

    def _producers(self):
        if not hasattr(self, "_open_producers"):
            self._open_producers = {}
        return self._open_producers

    def _producer(self, args):
        ent = self._producers().get(args.get("producer"))
        if ent is None:
            raise DriverError("CLIENT_ERROR", "no open producer %r" % args.get("producer"))
        return ent

    def producer_open(self, args):
        name = args["producer"]
        if name in self._producers():
            raise DriverError("CLIENT_ERROR", "producer %r is already open" % name)
        self._producers()[name] = {"p": self._txn_producer(args["transactional_id"], "matrix-py-txn-producer"),
                                   "in_txn": False}
        return {}

    def producer_send(self, args):
        ent = self._producer(args)
        end = args.get("end")
        if end not in ("commit", "abort", "open"):
            raise DriverError("CLIENT_ERROR", "unknown transaction end %r" % end)
        recs = [record_in(r) for r in args.get("records") or []]
        return self._txn_step(ent, args["topic"], recs, end)

    def producer_close(self, args):
        ent = self._producer(args)
        del self._producers()[args["producer"]]
        self._close_producer(ent["p"])
        return {}

    def close_producers(self):
        for ent in self._producers().values():
            try:
                self._close_producer(ent["p"])
            except Exception:  # Closing at exit: log it, the run goes on.
                logging.exception("closing a transactional producer")
        self._producers().clear()


class ConfluentTxn(ProducerHandles):
    """confluent-kafka: Producer transactions and send_offsets_to_transaction
    with the consumer's group metadata (KIP-447)."""

    def _txn_producer(self, txn_id, client_id):
        p = self.ck.Producer({"bootstrap.servers": self.bootstrap, "client.id": client_id, "transactional.id": txn_id,
                              "message.timeout.ms": DELIVERY_TIMEOUT_S * 1000,
                              "topic.metadata.propagation.max.ms": 2000, "allow.auto.create.topics": False})
        try:
            p.init_transactions(REQUEST_TIMEOUT_S)
        except self.ck.KafkaException as e:
            raise self.error(e)
        return p

    def _close_producer(self, p):
        p.flush(1)

    def _produce_all(self, p, topic, recs):
        """Produces (partition, key, value, headers, ts) tuples and waits for
        every delivery; the first failure raises."""
        deliveries, errors = [], []

        def cb(err, msg):
            if err is not None:
                errors.append(err)
            else:
                deliveries.append({"partition": msg.partition(), "offset": msg.offset()})

        dl = Deadline(DELIVERY_TIMEOUT_S + 5)
        for part, key, value, headers, _ in recs:
            kw = {"key": key, "value": value, "partition": max(part, 0), "on_delivery": cb}
            if headers:
                kw["headers"] = headers
            while True:
                try:
                    p.produce(topic, **kw)
                    break
                except BufferError:
                    if dl.left() == 0:
                        raise DriverError("CLIENT_TIMEOUT", "producer queue stayed full")
                    p.poll(0.1)
                except self.ck.KafkaException as e:
                    raise self.error(e)
        left = p.flush(dl.left())
        if errors:
            raise self.error(errors[0])
        if left:
            raise DriverError("CLIENT_TIMEOUT", "%d records not delivered" % left)
        return deliveries

    def _txn_step(self, ent, topic, recs, end):
        p = ent["p"]
        try:
            if not ent["in_txn"]:
                p.begin_transaction()
                ent["in_txn"] = True
            deliveries = self._produce_all(p, topic, recs)
            if end != "open":
                ent["in_txn"] = False
                if end == "commit":
                    p.commit_transaction(REQUEST_TIMEOUT_S)
                else:
                    p.abort_transaction(REQUEST_TIMEOUT_S)
        except self.ck.KafkaException as e:
            raise self.error(e)
        return {"deliveries": deliveries}

    def transform(self, args):
        transform_args(args)
        p = self._txn_producer(args["transactional_id"], "matrix-py-confluent-transform")
        c = self.ck.Consumer({"bootstrap.servers": self.bootstrap, "client.id": "matrix-py-confluent-transform",
                              "group.id": args["group"], "enable.auto.commit": False, "auto.offset.reset": "earliest",
                              "isolation.level": "read_committed", "fetch.wait.max.ms": 200})
        closed = False
        try:
            c.subscribe([args["input"]])

            def poll_batch(want, dl):
                recs = []
                while len(recs) < want:
                    if not recs and dl.left() == 0:
                        break
                    msg = c.poll(0.05 if recs else min(dl.left(), 0.1))
                    if msg is None:
                        if recs:
                            break
                        continue
                    err = msg.error()
                    if err is not None:
                        if err.fatal() or err.code() >= 0:
                            raise self.error(err)
                        continue
                    _, ts = msg.timestamp()
                    recs.append(record_out(msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers(), ts))
                return recs

            def run_txn(recs, commit):
                try:
                    p.begin_transaction()
                    self._produce_all(p, args["output"], [record_in(r) for r in recs])
                    offsets = [self.ck.TopicPartition(args["input"], part, off) for part, off in next_offsets(recs)]
                    p.send_offsets_to_transaction(offsets, c.consumer_group_metadata(), REQUEST_TIMEOUT_S)
                    if commit:
                        p.commit_transaction(REQUEST_TIMEOUT_S)
                    else:
                        p.abort_transaction(REQUEST_TIMEOUT_S)
                except self.ck.KafkaException as e:
                    raise self.error(e)

            out = transform_loop(args, poll_batch, run_txn)
            closed = True
            c.close()  # Leaves the group.
            return out
        finally:
            if not closed:
                c.close()
            p.flush(1)


class KafkaPythonTxn(ProducerHandles):
    """kafka-python: KafkaProducer transactions (kafka-python 2.1+) and
    send_offsets_to_transaction with KafkaConsumer.group_metadata()."""

    def _txn_producer(self, txn_id, client_id):
        E = self.errors
        try:
            p = self.kafka.KafkaProducer(bootstrap_servers=self.bootstrap, client_id=client_id, transactional_id=txn_id,
                                         enable_idempotence=True, acks="all", max_block_ms=5000,
                                         request_timeout_ms=REQUEST_TIMEOUT_S * 1000,
                                         delivery_timeout_ms=DELIVERY_TIMEOUT_S * 1000, allow_auto_create_topics=False)
        except E.KafkaError as e:
            raise self.error(e)
        try:
            p.init_transactions()
        except E.KafkaError as e:
            p.close(timeout=2)
            raise self.error(e)
        return p

    def _close_producer(self, p):
        p.close(timeout=2)

    def _produce_all(self, p, topic, recs):
        futures = []
        for part, key, value, headers, _ in recs:
            futures.append(p.send(topic, key=key, value=value, headers=headers or None, partition=max(part, 0)))
        dl = Deadline(DELIVERY_TIMEOUT_S + 5)
        p.flush(timeout=dl.left())
        deliveries = []
        for f in futures:
            md = f.get(timeout=dl.left())  # Raises the record's error.
            deliveries.append({"partition": md.partition, "offset": md.offset})
        return deliveries

    def _txn_step(self, ent, topic, recs, end):
        p = ent["p"]
        try:
            if not ent["in_txn"]:
                p.begin_transaction()
                ent["in_txn"] = True
            deliveries = self._produce_all(p, topic, recs)
            if end != "open":
                ent["in_txn"] = False
                if end == "commit":
                    p.commit_transaction()
                else:
                    p.abort_transaction()
        except self.errors.KafkaError as e:
            raise self.error(e)
        return {"deliveries": deliveries}

    def transform(self, args):
        E, K = self.errors, self.kafka
        transform_args(args)
        p = self._txn_producer(args["transactional_id"], "matrix-py-kafka-transform")
        try:
            try:
                c = K.KafkaConsumer(bootstrap_servers=self.bootstrap, client_id="matrix-py-kafka-transform",
                                    group_id=args["group"], enable_auto_commit=False, auto_offset_reset="earliest",
                                    isolation_level="read_committed", fetch_max_wait_ms=200,
                                    request_timeout_ms=REQUEST_TIMEOUT_S * 1000)
            except E.KafkaError as e:
                raise self.error(e)
            try:
                c.partitions_for_topic(args["input"])  # See group_consume: metadata before joining.
                c.subscribe([args["input"]])

                def poll_batch(want, dl):
                    while dl.left() > 0:
                        batch = c.poll(timeout_ms=int(min(dl.left(), 0.2) * 1000) + 1, max_records=want)
                        recs = [record_out(r.partition, r.offset, r.key, r.value, r.headers, r.timestamp)
                                for rs in batch.values() for r in rs]
                        if recs:
                            return recs
                    return []

                def run_txn(recs, commit):
                    p.begin_transaction()
                    self._produce_all(p, args["output"], [record_in(r) for r in recs])
                    offsets = {K.TopicPartition(args["input"], part): K.OffsetAndMetadata(off, "", -1)
                               for part, off in next_offsets(recs)}
                    p.send_offsets_to_transaction(offsets, c.group_metadata())
                    if commit:
                        p.commit_transaction()
                    else:
                        p.abort_transaction()

                return transform_loop(args, poll_batch, run_txn)
            except E.KafkaError as e:
                raise self.error(e)
            finally:
                c.close(autocommit=False)  # Leaves the group.
        finally:
            p.close(timeout=2)
