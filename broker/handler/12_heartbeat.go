package handler

// Heartbeat: v0-4
//
//   - v1: ThrottleMillis
//   - v3: InstanceID (KIP-345)
//   - v4: flexible
func init() { register(12, 0, 4, groupRequest) }
