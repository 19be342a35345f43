// Package all links every in-process matrix driver into a binary, so that
// importing it registers franz-go, sarama and confluent-kafka-go.
package all

import (
	_ "github.com/cascade-kafka/cascade/matrix/driver/confluent" // Registers "confluent-kafka-go" (cgo).
	_ "github.com/cascade-kafka/cascade/matrix/driver/franzgo"   // Registers "franz-go".
	_ "github.com/cascade-kafka/cascade/matrix/driver/sarama"    // Registers "sarama".
)
