// Package java registers the "java" matrix client: Apache Kafka's own
// client library (org.apache.kafka:kafka-clients, KafkaProducer,
// KafkaConsumer and Admin) behind the line-delimited JSON protocol of
// matrix/README.md, in one Maven project (pom.xml, src/main/java/Driver.java).
//
// On first use Ensure copies the embedded project into the cache
// ($CASCADE_CACHE_DIR/java/driver-<hash of the sources>) and builds it with
// `mvn -q -B package`, which also copies the runtime dependencies to
// target/lib; a file lock makes parallel test binaries build once. Each
// Open starts one JVM (`java -cp target/classes:target/lib/* Driver`) that
// serves every command of a matrix run. A missing java, javac or mvn fails
// with a message naming what to install. Importing the package (as
// matrix/driver/all does) registers the client.
package java
