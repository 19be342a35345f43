"""Shared pieces of the Python matrix drivers (driver.py, driver_txn.py):
Kafka's error names, the protocol's error type, byte and record encoding,
and the bounds every command keeps.
"""

import base64
import time

PROTOCOL = 1

# Kafka's error names by code, as in org.apache.kafka.common.protocol.Errors.
KAFKA_ERRORS = {
    -1: "UNKNOWN_SERVER_ERROR",
    1: "OFFSET_OUT_OF_RANGE",
    2: "CORRUPT_MESSAGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    4: "INVALID_FETCH_SIZE",
    5: "LEADER_NOT_AVAILABLE",
    6: "NOT_LEADER_FOR_PARTITION",
    7: "REQUEST_TIMED_OUT",
    8: "BROKER_NOT_AVAILABLE",
    9: "REPLICA_NOT_AVAILABLE",
    10: "MESSAGE_TOO_LARGE",
    11: "STALE_CONTROLLER_EPOCH",
    12: "OFFSET_METADATA_TOO_LARGE",
    13: "NETWORK_EXCEPTION",
    14: "COORDINATOR_LOAD_IN_PROGRESS",
    15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR",
    17: "INVALID_TOPIC_EXCEPTION",
    18: "RECORD_LIST_TOO_LARGE",
    19: "NOT_ENOUGH_REPLICAS",
    20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    21: "INVALID_REQUIRED_ACKS",
    22: "ILLEGAL_GENERATION",
    23: "INCONSISTENT_GROUP_PROTOCOL",
    24: "INVALID_GROUP_ID",
    25: "UNKNOWN_MEMBER_ID",
    26: "INVALID_SESSION_TIMEOUT",
    27: "REBALANCE_IN_PROGRESS",
    28: "INVALID_COMMIT_OFFSET_SIZE",
    29: "TOPIC_AUTHORIZATION_FAILED",
    30: "GROUP_AUTHORIZATION_FAILED",
    31: "CLUSTER_AUTHORIZATION_FAILED",
    32: "INVALID_TIMESTAMP",
    33: "UNSUPPORTED_SASL_MECHANISM",
    34: "ILLEGAL_SASL_STATE",
    35: "UNSUPPORTED_VERSION",
    36: "TOPIC_ALREADY_EXISTS",
    37: "INVALID_PARTITIONS",
    38: "INVALID_REPLICATION_FACTOR",
    39: "INVALID_REPLICA_ASSIGNMENT",
    40: "INVALID_CONFIG",
    41: "NOT_CONTROLLER",
    42: "INVALID_REQUEST",
    43: "UNSUPPORTED_FOR_MESSAGE_FORMAT",
    44: "POLICY_VIOLATION",
    45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    46: "DUPLICATE_SEQUENCE_NUMBER",
    47: "INVALID_PRODUCER_EPOCH",
    48: "INVALID_TXN_STATE",
    49: "INVALID_PRODUCER_ID_MAPPING",
    50: "INVALID_TRANSACTION_TIMEOUT",
    51: "CONCURRENT_TRANSACTIONS",
    52: "TRANSACTION_COORDINATOR_FENCED",
    53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    54: "SECURITY_DISABLED",
    55: "OPERATION_NOT_ATTEMPTED",
    56: "KAFKA_STORAGE_ERROR",
    57: "LOG_DIR_NOT_FOUND",
    58: "SASL_AUTHENTICATION_FAILED",
    59: "UNKNOWN_PRODUCER_ID",
    60: "REASSIGNMENT_IN_PROGRESS",
    61: "DELEGATION_TOKEN_AUTH_DISABLED",
    62: "DELEGATION_TOKEN_NOT_FOUND",
    63: "DELEGATION_TOKEN_OWNER_MISMATCH",
    64: "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
    65: "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
    66: "DELEGATION_TOKEN_EXPIRED",
    67: "INVALID_PRINCIPAL_TYPE",
    68: "NON_EMPTY_GROUP",
    69: "GROUP_ID_NOT_FOUND",
    70: "FETCH_SESSION_ID_NOT_FOUND",
    71: "INVALID_FETCH_SESSION_EPOCH",
    72: "LISTENER_NOT_FOUND",
    73: "TOPIC_DELETION_DISABLED",
    74: "FENCED_LEADER_EPOCH",
    75: "UNKNOWN_LEADER_EPOCH",
    76: "UNSUPPORTED_COMPRESSION_TYPE",
    77: "STALE_BROKER_EPOCH",
    78: "OFFSET_NOT_AVAILABLE",
    79: "MEMBER_ID_REQUIRED",
    80: "PREFERRED_LEADER_NOT_AVAILABLE",
    81: "GROUP_MAX_SIZE_REACHED",
    82: "FENCED_INSTANCE_ID",
    83: "ELIGIBLE_LEADERS_NOT_AVAILABLE",
    84: "ELECTION_NOT_NEEDED",
    85: "NO_REASSIGNMENT_IN_PROGRESS",
    86: "GROUP_SUBSCRIBED_TO_TOPIC",
    87: "INVALID_RECORD",
    88: "UNSTABLE_OFFSET_COMMIT",
    89: "THROTTLING_QUOTA_EXCEEDED",
    90: "PRODUCER_FENCED",
    91: "RESOURCE_NOT_FOUND",
    92: "DUPLICATE_RESOURCE",
    93: "UNACCEPTABLE_CREDENTIAL",
    94: "INCONSISTENT_VOTER_SET",
    95: "INVALID_UPDATE_VERSION",
    96: "FEATURE_UPDATE_FAILED",
    97: "PRINCIPAL_DESERIALIZATION_FAILURE",
    98: "SNAPSHOT_NOT_FOUND",
    99: "POSITION_OUT_OF_RANGE",
    100: "UNKNOWN_TOPIC_ID",
    101: "DUPLICATE_BROKER_REGISTRATION",
    102: "BROKER_ID_NOT_REGISTERED",
    103: "INCONSISTENT_TOPIC_ID",
    104: "INCONSISTENT_CLUSTER_ID",
    105: "TRANSACTIONAL_ID_NOT_FOUND",
    106: "FETCH_SESSION_TOPIC_ID_ERROR",
    107: "INELIGIBLE_REPLICA",
    108: "NEW_LEADER_ELECTED",
    109: "OFFSET_MOVED_TO_TIERED_STORAGE",
    110: "FENCED_MEMBER_EPOCH",
    111: "UNRELEASED_INSTANCE_ID",
    112: "UNSUPPORTED_ASSIGNOR",
    113: "STALE_MEMBER_EPOCH",
    114: "MISMATCHED_ENDPOINT_TYPE",
    115: "UNSUPPORTED_ENDPOINT_TYPE",
    116: "UNKNOWN_CONTROLLER_ID",
    117: "UNKNOWN_SUBSCRIPTION_ID",
    118: "TELEMETRY_TOO_LARGE",
    119: "INVALID_REGISTRATION",
    120: "TRANSACTION_ABORTABLE",
    121: "INVALID_RECORD_STATE",
    122: "SHARE_SESSION_NOT_FOUND",
    123: "INVALID_SHARE_SESSION_EPOCH",
    124: "FENCED_STATE_EPOCH",
    125: "INVALID_VOTER_KEY",
    126: "DUPLICATE_VOTER",
    127: "VOTER_NOT_FOUND",
    128: "INVALID_REGULAR_EXPRESSION",
    129: "REBOOTSTRAP_REQUIRED",
    130: "STREAMS_INVALID_TOPOLOGY",
    131: "STREAMS_INVALID_TOPOLOGY_EPOCH",
    132: "STREAMS_TOPOLOGY_FENCED",
    133: "SHARE_SESSION_LIMIT_REACHED",
    134: "GROUP_DELETION_FAILED",
    135: "STREAMS_TOPOLOGY_DESCRIPTION_UPDATE_FAILED",
    136: "CONTROLLER_ID_NOT_REGISTERED",
}


class DriverError(Exception):
    """An error answered to the orchestrator with a Kafka error name."""

    def __init__(self, code, message=""):
        super().__init__("%s: %s" % (code, message) if message else code)
        self.code = code
        self.message = message

    def to_json(self):
        return {"code": self.code, "message": self.message}


def unsupported(message):
    """Returns the error for an operation or option the library lacks."""
    return DriverError("UNSUPPORTED", message)


def kafka_code_name(code):
    """Returns Kafka's name for a broker error code."""
    return KAFKA_ERRORS.get(code, "UNKNOWN_CODE_%d" % code)


def b64decode(s):
    """Decodes a protocol byte field: None stays None (null), "" is empty."""
    if s is None:
        return None
    return base64.b64decode(s, validate=True)


def b64encode(b):
    """Encodes bytes for the protocol: None stays None (null)."""
    if b is None:
        return None
    return base64.b64encode(bytes(b)).decode("ascii")


def short(s, n=400):
    """Shortens a library message for an error answer."""
    s = str(s)
    return s if len(s) <= n else s[:n] + "..."


class Deadline:
    """A point in time, for loops bounded by a command's timeout."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return max(0.0, self.end - time.monotonic())


# Bounds that keep every command well inside the orchestrator's 30-second
# cell timeout: a command that outlived it would get the process killed.
REQUEST_TIMEOUT_S = 10
DELIVERY_TIMEOUT_S = 15


def produce_args(args):
    """Validates the produce command and returns its normalised fields."""
    codec = args.get("codec") or "none"
    if codec not in ("none", "gzip", "snappy", "lz4", "zstd"):
        raise DriverError("CLIENT_ERROR", "unknown codec %r" % codec)
    acks = args.get("acks", -1)
    if acks not in (0, 1, -1):
        raise DriverError("CLIENT_ERROR", "acks must be 0, 1 or -1, not %r" % acks)
    return codec, acks


def record_in(r):
    """Decodes one protocol record into (partition, key, value, headers, ts)."""
    headers = [(h["key"], b64decode(h.get("value"))) for h in (r.get("headers") or [])]
    return (r.get("partition", 0), b64decode(r.get("key")), b64decode(r.get("value")),
            headers, r.get("timestamp_ms") or 0)


def record_out(partition, offset, key, value, headers, timestamp_ms):
    """Encodes one consumed record for the protocol."""
    out = {"partition": partition, "offset": offset, "key": b64encode(key),
           "value": b64encode(value), "timestamp_ms": timestamp_ms}
    if headers:
        out["headers"] = [{"key": k, "value": b64encode(v)} for k, v in headers]
    return out


def next_offsets(records):
    """Returns [(partition, next offset)] after the given consumed records,
    sorted by partition: what a member commits after returning them."""
    nxt = {}
    for r in records:
        nxt[r["partition"]] = max(nxt.get(r["partition"], 0), r["offset"] + 1)
    return sorted(nxt.items())


def end_transaction(records_failed, args, commit, abort):
    """Commits the command's transaction, or aborts it when a record failed
    or the command asked for an abort (txn_abort)."""
    if records_failed or args.get("txn_abort"):
        abort()
    else:
        commit()


def check_topic_regex(args, protocol):
    """Refuses a topic_regex the group_consume command does not allow: only
    with the consumer protocol, and without commit."""
    if not args.get("topic_regex"):
        return
    if protocol != "consumer":
        raise DriverError("CLIENT_ERROR", "topic_regex needs protocol \"consumer\", not %r" % protocol)
    if args.get("commit"):
        raise DriverError("CLIENT_ERROR", "topic_regex cannot commit: the records do not say their topic")
