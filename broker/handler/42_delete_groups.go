package handler

// DeleteGroups: v0-2
//
//   - v1: no change
//   - v2: flexible
//
// Only empty groups are deleted (NON_EMPTY_GROUP otherwise); their offsets
// and metadata get tombstones in __consumer_offsets.
func init() { register(42, 0, 2, groupRequest) }
