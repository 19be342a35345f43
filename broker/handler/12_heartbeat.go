package handler

// Heartbeat: v0-4
//
//   - v1: ThrottleMillis
//   - v3: InstanceID (KIP-345)
//   - v4: flexible
//
// A classic member of a consumer group (KIP-848 online migration) is told
// REBALANCE_IN_PROGRESS when it must rejoin: the group epoch moved past its
// own, it has partitions to revoke, or partitions it waited for are free.
func init() { register(12, 0, 4, groupRequest) }
