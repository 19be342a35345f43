package handler

// OffsetDelete: v0
//
// As Kafka's GroupMetadataManager.deleteOffsets: a partition of a topic the
// group still consumes answers GROUP_SUBSCRIBED_TO_TOPIC; a non-empty group
// not using the consumer protocol answers NON_EMPTY_GROUP.
func init() { register(47, 0, 0, groupRequest) }
