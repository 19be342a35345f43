// Package all links every matrix driver into a binary, so that importing
// it registers franz-go, sarama and confluent-kafka-go (in process) and the
// Python and Java clients (out of process, provisioned on first use).
package all

import (
	_ "github.com/cascade-kafka/cascade/matrix/clients/java"     // Registers "java" (built by Maven on first use).
	_ "github.com/cascade-kafka/cascade/matrix/clients/python"   // Registers "python-confluent-kafka" and "python-kafka-python".
	_ "github.com/cascade-kafka/cascade/matrix/driver/confluent" // Registers "confluent-kafka-go" (cgo).
	_ "github.com/cascade-kafka/cascade/matrix/driver/franzgo"   // Registers "franz-go".
	_ "github.com/cascade-kafka/cascade/matrix/driver/sarama"    // Registers "sarama".
)
