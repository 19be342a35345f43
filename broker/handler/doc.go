// Package handler owns the broker's request handlers: one file per Kafka API
// key (00_produce.go ... 61_describe_producers.go), the registry that
// ApiVersions is built from, the dispatcher the wire server calls, the Env
// of services handlers share, and the mapping of Go errors to Kafka error
// codes (errors.go), which happens only here, at the edge. Each handler
// authorizes its request as Kafka's KafkaApis does (authorize.go, with
// the group and config APIs' checks in authorize_groups.go and
// authorize_configs.go) when Env.Authorizer is set.
//
// Each handler file opens with the versions it implements and what each
// version adds, and registers that range in init, so what ApiVersions
// advertises is exactly what exists. Kafka errors travel as codes inside
// responses; a Go error returned by a handler closes the connection.
//
// Use (the composition root does this):
//
//	env := &handler.Env{NodeID: 1, Meta: store, Partitions: parts, ...}
//	srv := &wire.Server{Dispatcher: env}
package handler
