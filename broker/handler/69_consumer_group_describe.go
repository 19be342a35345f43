package handler

// ConsumerGroupDescribe: v0-1 (KIP-848)
//
//   - v1: MemberType (KIP-1099)
func init() { register(69, 0, 1, groupRequest) }
