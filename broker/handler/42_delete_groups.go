package handler

// DeleteGroups: v0-3
//
//   - v1: no change
//   - v2: flexible
//   - v3: a per-group ErrorMessage. Kafka's GroupCoordinatorService fills
//     it only when a Streams topology plugin refuses a deletion or the
//     whole operation fails with an unexpected exception; the per-group
//     errors of its shard (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP,
//     INVALID_GROUP_ID) and coordinator errors leave it null, and so does
//     Cascade, which has neither.
//
// Only empty groups are deleted (NON_EMPTY_GROUP otherwise); their offsets
// and metadata get tombstones in __consumer_offsets.
func init() { register(42, 0, 3, groupRequest) }
