package handler

// ConsumerGroupHeartbeat: v0-1 (KIP-848)
//
//   - v1: SubscribedTopicRegex; the client generates its member id (KIP-1082)
//
// Server-side assignors: uniform (default) and range
// (group.consumer.assignors). A member joining a non-empty classic group of
// the consumer protocol type upgrades it to a consumer group, and the last
// member of this protocol leaving a group of classic members downgrades it
// (KIP-848 online migration, group.consumer.migration.policy).
func init() { register(68, 0, 1, groupRequest) }
