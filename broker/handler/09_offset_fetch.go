package handler

// OffsetFetch: v1-9
//
//   - v2: null Topics fetches every committed offset; top-level ErrorCode
//   - v3: ThrottleMillis
//   - v5: LeaderEpoch
//   - v6: flexible
//   - v7: RequireStable (KIP-447); no pending transactional offsets exist yet
//   - v8: batched Groups (KIP-709)
//   - v9: MemberID and MemberEpoch, checked for KIP-848 groups
func init() { register(9, 1, 9, groupRequest) }
