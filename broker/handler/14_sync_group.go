package handler

// SyncGroup: v0-5
//
//   - v1: ThrottleMillis
//   - v3: InstanceID (KIP-345)
//   - v4: flexible
//   - v5: ProtocolType and Protocol, checked against the group's (KIP-559)
//
// A classic member of a consumer group (KIP-848 online migration) receives
// the assignment the server-side assignor reconciled for it, encoded in the
// consumer protocol version of its subscription. A leader's assignment
// whose GroupMetadata record cannot be appended to __consumer_offsets is
// answered with the append error as Kafka maps it
// (appendGroupMetadataErrorToResponseError), to the leader and to the
// members waiting for it: UNKNOWN_SERVER_ERROR for a record larger than
// max.message.bytes.
func init() { register(14, 0, 5, groupRequest) }
