"""Unit tests of driver.py that need no broker (run by python_test.go in
the provisioned virtualenv: python -m unittest driver_test)."""

import io
import json
import unittest

import driver
import driver_common


def run(client, *cmds):
    out = io.StringIO()
    driver.serve(client, io.StringIO("".join(json.dumps(c) + "\n" for c in cmds)), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


class ServeTest(unittest.TestCase):
    def test_hello_unknown_op_close(self):
        for client in sorted(driver.CLIENTS):
            got = run(client,
                      {"id": 1, "op": "produce", "args": {}},
                      {"id": 2, "op": "hello", "args": {"bootstrap": "127.0.0.1:1", "protocol": 1}},
                      {"id": 3, "op": "no_such_op", "args": {}},
                      {"id": 4, "op": "hello", "args": {"bootstrap": "127.0.0.1:1", "protocol": 1}},
                      {"id": 5, "op": "close"},
                      {"id": 6, "op": "hello", "args": {}})
            self.assertEqual([r["id"] for r in got], [1, 2, 3, 4, 5], client)  # Nothing after close.
            self.assertEqual(got[0]["error"]["code"], "CLIENT_ERROR")  # Before hello.
            self.assertEqual(got[1]["result"]["client"], client)
            self.assertEqual(got[1]["result"]["protocol"], driver.PROTOCOL)
            self.assertEqual(got[2]["error"]["code"], "UNSUPPORTED")
            self.assertFalse(got[3]["ok"])  # Hello twice.
            self.assertEqual(got[4], {"id": 5, "ok": True, "result": {}})

    def test_wrong_protocol(self):
        got = run("python-kafka-python", {"id": 1, "op": "hello", "args": {"bootstrap": "x:1", "protocol": 2}})
        self.assertFalse(got[0]["ok"])

    def test_kafka_python_null_header_unsupported(self):
        d = driver.KafkaPythonDriver("127.0.0.1:1")
        with self.assertRaises(driver.DriverError) as cm:
            d.produce({"topic": "t", "acks": -1, "records": [{"partition": 0, "value": "",
                                                              "headers": [{"key": "h", "value": None}]}]})
        self.assertEqual(cm.exception.code, "UNSUPPORTED")


class CodecTest(unittest.TestCase):
    def test_bytes_null_and_empty_stay_apart(self):
        self.assertIsNone(driver_common.b64decode(None))
        self.assertEqual(driver_common.b64decode(""), b"")
        self.assertIsNone(driver_common.b64encode(None))
        self.assertEqual(driver_common.b64encode(b""), "")
        self.assertEqual(driver_common.b64decode(driver_common.b64encode(b"\x00\xff")), b"\x00\xff")

    def test_next_offsets(self):
        recs = [{"partition": 1, "offset": 4}, {"partition": 0, "offset": 7}, {"partition": 1, "offset": 2}]
        self.assertEqual(driver.next_offsets(recs), [(0, 8), (1, 5)])


class ErrorTest(unittest.TestCase):
    def test_kafka_names(self):
        self.assertEqual(driver.kafka_code_name(36), "TOPIC_ALREADY_EXISTS")
        self.assertEqual(driver.kafka_code_name(10), "MESSAGE_TOO_LARGE")
        self.assertEqual(driver.kafka_code_name(17), "INVALID_TOPIC_EXCEPTION")
        self.assertEqual(driver.kafka_code_name(9999), "UNKNOWN_CODE_9999")

    def test_confluent_error_mapping(self):
        import confluent_kafka as ck
        d = driver.ConfluentDriver("127.0.0.1:1")
        self.assertEqual(d.error(ck.KafkaError(3)).code, "UNKNOWN_TOPIC_OR_PARTITION")
        self.assertEqual(d.error(ck.KafkaException(ck.KafkaError(ck.KafkaError._MSG_TIMED_OUT))).code, "CLIENT_TIMEOUT")
        self.assertEqual(d.error(ck.KafkaError(ck.KafkaError._UNKNOWN_TOPIC)).code, "CLIENT_UNKNOWN_TOPIC")

    def test_kafka_python_error_mapping(self):
        import kafka.errors as E
        d = driver.KafkaPythonDriver("127.0.0.1:1")
        self.assertEqual(d.error(E.TopicAlreadyExistsError("x")).code, "TOPIC_ALREADY_EXISTS")
        self.assertEqual(d.error(E.KafkaTimeoutError("Failed to update metadata after 5.0 secs.")).code,
                         "CLIENT_UNKNOWN_TOPIC")
        self.assertEqual(d.error(ValueError("x")).code, "CLIENT_ERROR")


class _FakeAdmin:
    """Answers describe_groups and list_groups as kafka-python 3.0 does."""

    def __init__(self, groups):
        self.groups = groups

    def describe_groups(self, group_ids):
        return {g: self.groups[g] for g in group_ids}

    def list_groups(self):
        return [{"group_id": "b", "protocol_type": "consumer"}, {"group_id": "a", "protocol_type": "consumer"},
                {"group_id": "a", "protocol_type": "consumer"}]


class GroupAdminTest(unittest.TestCase):
    def driver(self, groups):
        d = driver.KafkaPythonDriver("127.0.0.1:1")
        d._admin = _FakeAdmin(groups)
        return d

    def test_kafka_python_describe_group(self):
        from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
        assigned = ConsumerProtocolAssignment(assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic="t", partitions=[0, 1])], user_data=None, version=0)
        d = self.driver({"g": {"group_id": "g", "group_state": "Stable", "error": None, "members": [
            {"member_id": "m-1", "client_id": "c", "member_assignment": assigned.to_dict()},
            {"member_id": "m-2", "client_id": "c", "member_assignment": assigned},
            {"member_id": "m-3", "client_id": "c", "member_assignment": None}]}})
        res = d.describe_group({"group": "g"})
        self.assertEqual(res["state"], "Stable")
        want = [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]
        self.assertEqual([m["assignment"] for m in res["members"]], [want, want, []])
        self.assertEqual(d.list_groups({}), {"groups": ["a", "b"]})

    def test_kafka_python_describe_group_error(self):
        d = self.driver({"g": {"group_id": "g", "error": "[Error 69] GroupIdNotFoundError: g"}})
        with self.assertRaises(driver.DriverError) as cm:
            d.describe_group({"group": "g"})
        self.assertEqual(cm.exception.code, "GROUP_ID_NOT_FOUND")


if __name__ == "__main__":
    unittest.main()
