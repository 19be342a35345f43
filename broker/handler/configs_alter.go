package handler

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/cascade-kafka/cascade/broker/config"
	"github.com/cascade-kafka/cascade/broker/logging"
)

// configAlteration is one resource of an AlterConfigs (33) or
// IncrementalAlterConfigs (44) request, seen through what the two APIs
// share; each handler fills in only what differs.
type configAlteration struct {
	resourceType kmsg.ConfigResourceType
	resourceName string
	// ops lists the resource's configs in request order. The legacy API's
	// are all SETs; a null value is kept as nil.
	ops []configOp
	// incremental is set for IncrementalAlterConfigs, the only API that
	// takes BROKER_LOGGER resources (KIP-412) and DELETE operations.
	incremental bool
	// validateOnly is the request's flag.
	validateOnly bool
	// alterTopic validates the change of a TOPIC resource as a whole and,
	// unless the request is validate-only, writes it durably.
	alterTopic func() error
}

// configOp is one config of a resource: its name, operation (a
// kmsg.IncrementalAlterConfigOp) and value.
type configOp struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

// configAlterationResult is the answer for one resource.
type configAlterationResult struct {
	resourceType kmsg.ConfigResourceType
	resourceName string
	errorCode    int16
	errorMessage *string
}

// alterConfigResources answers each resource of an AlterConfigs or
// IncrementalAlterConfigs request, in request order, with one answer per
// resource. The checks and their order are those of Kafka's
// ConfigAdminManager.preprocess, which runs on the broker before the rest
// goes to the controller:
//
//  1. A resource (type and name) named more than once: every occurrence
//     answers INVALID_REQUEST "Each resource must appear at most once." and
//     none is changed. (Kafka 4.4 computes that answer for the legacy API
//     too, but then fails building the response: AlterConfigsResponse
//     collects its results into a map keyed by resource, which throws on
//     the duplicate, and the request is never answered. Cascade sends the
//     answer Kafka computed rather than leave the client waiting.)
//  2. A config named twice within a resource: INVALID_REQUEST "Error due
//     to duplicate config keys".
//  3. A null value (other than for a DELETE): INVALID_REQUEST "Null value
//     not supported for : a, b".
//  4. By resource type: BROKER_LOGGER (incremental only) changes log levels
//     here (see alterLoggers); BROKER is validated (see alterBrokerConfigs);
//     TOPIC goes to the metadata store, as Kafka's controller; GROUP and
//     CLIENT_METRICS, which Cascade does not store, are INVALID_REQUEST;
//     any other type is INVALID_REQUEST "Unknown resource type N".
//
// Every error code is counted in the metrics under key.
func alterConfigResources(env *Env, key int16, alts []configAlteration) []configAlterationResult {
	type resourceKey struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	count := make(map[resourceKey]int, len(alts))
	for _, a := range alts {
		count[resourceKey{a.resourceType, a.resourceName}]++
	}
	out := make([]configAlterationResult, 0, len(alts))
	for _, a := range alts {
		r := configAlterationResult{resourceType: a.resourceType, resourceName: a.resourceName}
		if count[resourceKey{a.resourceType, a.resourceName}] > 1 {
			r.errorCode, r.errorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("Each resource must appear at most once.")
		} else {
			r.errorCode, r.errorMessage = alterConfigResource(env, a)
		}
		if r.errorCode != 0 {
			env.Metrics.Error(key, r.errorCode)
		}
		out = append(out, r)
	}
	return out
}

// alterConfigResource answers one resource that is not a duplicate: checks
// 2 to 4 of alterConfigResources.
func alterConfigResource(env *Env, a configAlteration) (int16, *string) {
	invalid := func(msg string) (int16, *string) { return kerr.InvalidRequest.Code, &msg }
	named := make(map[string]bool, len(a.ops))
	var nulls []string
	for _, op := range a.ops {
		if named[op.name] {
			return invalid("Error due to duplicate config keys")
		}
		named[op.name] = true
		if op.value == nil && (!a.incremental || op.op != kmsg.IncrementalAlterConfigOpDelete) {
			nulls = append(nulls, op.name)
		}
	}
	if len(nulls) > 0 {
		return invalid("Null value not supported for : " + strings.Join(nulls, ", "))
	}
	switch a.resourceType {
	case kmsg.ConfigResourceTypeBrokerLogger:
		if a.incremental && env.Loggers != nil {
			return alterLoggers(env, a)
		}
	case kmsg.ConfigResourceTypeBroker:
		return alterBrokerConfigs(env, a)
	case kmsg.ConfigResourceTypeTopic:
		if err := a.alterTopic(); err != nil {
			return ErrorCode(err), errMessage(err)
		}
		return 0, nil
	case kmsg.ConfigResourceTypeGroupConfig:
		return invalid("Unsupported resource type: GROUP")
	case kmsg.ConfigResourceTypeClientMetrics:
		return invalid("Unsupported resource type: CLIENT_METRICS")
	}
	// As ConfigAdminManager: the legacy API never took BROKER_LOGGER.
	return invalid(fmt.Sprintf("Unknown resource type %d", int8(a.resourceType)))
}

// checkNodeName validates the name of a BROKER or BROKER_LOGGER resource to
// alter: this node's id. The wording is that of ConfigAdminManager
// (BROKER) and RuntimeLoggerManager (BROKER_LOGGER), which differ. An Env
// without a broker Config has node id -1 (Kafka's node.id default), which
// no resource name matches, so every named node is refused.
func checkNodeName(env *Env, typ kmsg.ConfigResourceType, name string) (int16, *string) {
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return kerr.InvalidRequest.Code, kmsg.StringPtr("Node id must be an integer, but it is: " + name)
	}
	node := int32(-1)
	if env.Config != nil {
		node = env.Config.NodeID
	}
	if node >= 0 && int32(id) == node {
		return 0, nil
	}
	if typ == kmsg.ConfigResourceTypeBrokerLogger {
		return kerr.InvalidRequest.Code, kmsg.StringPtr(fmt.Sprintf("Unexpected node id. Expected %d, but received %s", node, name))
	}
	return kerr.InvalidRequest.Code, kmsg.StringPtr(fmt.Sprintf("Unexpected broker id, expected %d, but received %s", node, name))
}

// alterBrokerConfigs answers an AlterConfigs or IncrementalAlterConfigs of
// a BROKER resource: this node's id or the empty name (cluster-wide
// defaults). Cascade changes no broker config at run time, so every change
// that Kafka would accept is refused with INVALID_REQUEST; the refusals
// Kafka makes itself come first, with Kafka's words:
//   - a config Kafka cannot change dynamically: "Cannot update these
//     configs dynamically: [a, b]" (DynamicBrokerConfig, which
//     ConfigAdminManager turns into INVALID_REQUEST, KAFKA-13609);
//   - removing the cluster-wide min.insync.replicas, which a Kafka 4 cluster
//     holds for eligible leader replicas (KIP-966): INVALID_CONFIG, as
//     Kafka's ConfigurationControlManager. The legacy API removes every
//     config it does not name, so a legacy request on the empty name that
//     does not name min.insync.replicas is refused so.
//
// A request changing nothing is accepted, and so is removing a config
// Cascade does not honour (it cannot have been set).
func alterBrokerConfigs(env *Env, a configAlteration) (int16, *string) {
	if a.resourceName != "" {
		if code, msg := checkNodeName(env, a.resourceType, a.resourceName); code != 0 {
			return code, msg
		}
	}
	var static, dynamic, unknown []string
	removesMinISR := !a.incremental && a.resourceName == ""
	for _, op := range a.ops {
		if a.incremental && (op.op < kmsg.IncrementalAlterConfigOpSet || op.op > kmsg.IncrementalAlterConfigOpSubtract) {
			return kerr.InvalidRequest.Code, kmsg.StringPtr(fmt.Sprintf("Unknown operations type %d", int8(op.op)))
		}
		if op.name == "min.insync.replicas" && a.resourceName == "" {
			removesMinISR = a.incremental && op.op == kmsg.IncrementalAlterConfigOpDelete
		}
		def, ok := config.BrokerDef(op.name)
		switch {
		case !ok && a.incremental && op.op == kmsg.IncrementalAlterConfigOpDelete:
			// Nothing Cascade does not honour can have been set, so
			// removing it changes nothing: accepted, as Kafka accepts
			// removing any broker config. kafka-reassign-partitions
			// --verify removes the replication throttles so.
		case !ok:
			unknown = append(unknown, op.name)
		case def.Dynamic:
			dynamic = append(dynamic, op.name)
		default:
			static = append(static, op.name)
		}
	}
	switch {
	case len(static) > 0:
		return kerr.InvalidRequest.Code, kmsg.StringPtr("Cannot update these configs dynamically: " + javaSet(static))
	case removesMinISR:
		return kerr.InvalidConfig.Code, kmsg.StringPtr("Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
	case len(unknown) > 0:
		return kerr.InvalidRequest.Code, kmsg.StringPtr("Cascade does not honour these configs: " + javaSet(unknown))
	case len(dynamic) > 0:
		return kerr.InvalidRequest.Code, kmsg.StringPtr("Cascade does not update broker configs at run time; set them in server.properties: " + javaSet(dynamic))
	}
	return 0, nil
}

// javaSet renders names as Java prints a Set, as Kafka 4's messages do.
func javaSet(names []string) string {
	return "[" + strings.Join(names, ", ") + "]"
}

// alterLoggers answers an IncrementalAlterConfigs of a BROKER_LOGGER
// resource, as Kafka's RuntimeLoggerManager.applyChangesForResource: the
// name must be this node's id; every operation is validated, in order, and
// the first bad one refuses the whole resource; then, unless the request
// is validate-only, each is applied: SET sets a logger's level (and its
// descendants'), DELETE removes it so the logger inherits its ancestor's.
// Levels last until the broker stops, as in Kafka, where they are not
// stored either.
func alterLoggers(env *Env, a configAlteration) (int16, *string) {
	if code, msg := checkNodeName(env, a.resourceType, a.resourceName); code != 0 {
		return code, msg
	}
	lv := env.Loggers
	for _, op := range a.ops {
		switch op.op {
		case kmsg.IncrementalAlterConfigOpSet:
			if !lv.Exists(op.name) {
				return loggerMissing(op.name)
			}
			if _, ok := logging.ParseLevel(*op.value); !ok {
				return kerr.InvalidConfig.Code, kmsg.StringPtr(fmt.Sprintf("Cannot set the log level of %s to %s as it is not a supported log level. Valid log levels are %s",
					op.name, *op.value, logging.ValidLevels))
			}
		case kmsg.IncrementalAlterConfigOpDelete:
			if !lv.Exists(op.name) {
				return loggerMissing(op.name)
			}
			if op.name == logging.RootLogger {
				return kerr.InvalidRequest.Code, kmsg.StringPtr("Removing the log level of the " + logging.RootLogger + " logger is not allowed")
			}
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			return kerr.InvalidRequest.Code, kmsg.StringPtr(fmt.Sprintf("%s operation is not allowed for the BROKER_LOGGER resource", op.op))
		default:
			return kerr.InvalidRequest.Code, kmsg.StringPtr(fmt.Sprintf("Unknown operation type %d is not allowed for the BROKER_LOGGER resource", int8(op.op)))
		}
	}
	if a.validateOnly {
		return 0, nil
	}
	// As Kafka's ControllerApis/ConfigAdminManager around
	// RuntimeLoggerManager.applyChangesForResource: a change that fails
	// while being applied stops the resource, which answers the error
	// (ApiError.fromThrowable: UNKNOWN_SERVER_ERROR) rather than success.
	log := env.logger()
	for _, op := range a.ops {
		if op.op == kmsg.IncrementalAlterConfigOpSet {
			if err := lv.Set(op.name, *op.value); err != nil {
				log.Error("failed to update a log level", "name", op.name, "level", *op.value, "err", err)
				return kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
			}
			log.Warn("updated a log level", "name", op.name, "level", *op.value)
			continue
		}
		if err := lv.Unset(op.name); err != nil {
			log.Error("failed to unset a log level", "name", op.name, "err", err)
			return kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
		}
		log.Warn("unset a log level", "name", op.name)
	}
	return 0, nil
}

func loggerMissing(name string) (int16, *string) {
	return kerr.InvalidConfig.Code, kmsg.StringPtr("Logger " + name + " does not exist!")
}
