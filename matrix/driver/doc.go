// Package driver defines the contract between the compatibility matrix and
// a Kafka client library: the Driver interface, its request and result
// types, Kafka-named errors, and the registry of drivers by client id.
//
// In-process Go drivers live in subpackages (franzgo, sarama, confluent) and
// register themselves in init; out-of-process drivers (Python, Java) speak
// the line-delimited JSON protocol of matrix/README.md through Process.
//
//	import _ "github.com/cascade-kafka/cascade/matrix/driver/franzgo"
//	open, _ := driver.Lookup("franz-go")
//	d, err := open(ctx, "127.0.0.1:9092")
package driver
