package handler

// ConsumerGroupHeartbeat: v0-1 (KIP-848)
//
//   - v1: SubscribedTopicRegex; the client generates its member id (KIP-1082)
//
// Server-side assignors: uniform (default) and range
// (group.consumer.assignors).
func init() { register(68, 0, 1, groupRequest) }
