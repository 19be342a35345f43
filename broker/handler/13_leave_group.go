package handler

// LeaveGroup: v0-5
//
//   - v1: ThrottleMillis
//   - v3: batched Members with InstanceID (KIP-345)
//   - v4: flexible
//   - v5: Reason (KIP-800)
//
// In a consumer group (KIP-848 online migration) only members using the
// classic protocol leave this way; the group epoch is bumped once.
func init() { register(13, 0, 5, groupRequest) }
