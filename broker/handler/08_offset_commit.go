package handler

// OffsetCommit: v2-9
//
//   - v2-4: RetentionTimeMillis; a retention other than -1 sets the offset's
//     expire timestamp (OffsetCommitValue v1)
//   - v3: ThrottleMillis
//   - v6: LeaderEpoch (KIP-320)
//   - v7: InstanceID (KIP-345)
//   - v8: flexible
//   - v9: KIP-848 member epochs: STALE_MEMBER_EPOCH, GROUP_ID_NOT_FOUND
//
// v0-1 are gone since Kafka 4.0 (KIP-896). A commit is answered only once
// its records are appended to __consumer_offsets.
func init() { register(8, 2, 9, groupRequest) }
