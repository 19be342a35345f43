package handler

// DescribeGroups: v0-6
//
//   - v1: ThrottleMillis
//   - v3: AuthorizedOperations (answered as not requested: no ACLs)
//   - v4: InstanceID
//   - v5: flexible
//   - v6: GROUP_ID_NOT_FOUND with ErrorMessage for unknown and KIP-848 groups (KIP-1043)
func init() { register(15, 0, 6, groupRequest) }
