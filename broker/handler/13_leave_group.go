package handler

// LeaveGroup: v0-5
//
//   - v1: ThrottleMillis
//   - v3: batched Members with InstanceID (KIP-345)
//   - v4: flexible
//   - v5: Reason (KIP-800)
func init() { register(13, 0, 5, groupRequest) }
