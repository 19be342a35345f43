package handler

// JoinGroup: v0-9
//
//   - v1: RebalanceTimeoutMillis (v0 uses the session timeout)
//   - v2: ThrottleMillis
//   - v4: MEMBER_ID_REQUIRED: a new member must rejoin with the id it is given (KIP-394)
//   - v5: InstanceID, static membership (KIP-345)
//   - v6: flexible
//   - v7: ProtocolType in the response (KIP-559)
//   - v8: Reason (KIP-800)
//   - v9: SkipAssignment for a static leader rejoining a stable group (KIP-814)
//
// Older versions are kept for KafkaJS and old kafka-python clients. The
// coordinator is broker/group (GroupMetadataManager's classic path). In a
// consumer group (KIP-848) the member is served by the consumer group's
// state machine: SyncGroup returns its server-side assignment and Heartbeat
// answers REBALANCE_IN_PROGRESS when it must rejoin.
func init() { register(11, 0, 9, groupRequest) }
