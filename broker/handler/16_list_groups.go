package handler

// ListGroups: v0-5
//
//   - v1: ThrottleMillis
//   - v3: flexible
//   - v4: StatesFilter and GroupState (KIP-518)
//   - v5: TypesFilter and GroupType (KIP-848)
func init() { register(16, 0, 5, groupRequest) }
