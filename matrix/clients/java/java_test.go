package java

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cascade-kafka/cascade/matrix/clients/provision"
)

// TestMissingJava checks the message a machine without Java gets.
func TestMissingJava(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("JAVA_HOME", "")
	_, err := Ensure(context.Background())
	if !errors.Is(err, provision.ErrToolMissing) || !strings.Contains(err.Error(), "openjdk") {
		t.Fatalf("err = %v, want ErrToolMissing naming a JDK package", err)
	}
}

// TestPomPinsKafkaClients holds kafkaClientsVersion equal to pom.xml's pin.
func TestPomPinsKafkaClients(t *testing.T) {
	pom, err := os.ReadFile("pom.xml")
	if err != nil {
		t.Fatal(err)
	}
	if want := "<kafka.version>" + kafkaClientsVersion + "</kafka.version>"; !strings.Contains(string(pom), want) {
		t.Fatalf("pom.xml lacks %s", want)
	}
}

// TestDriverHandshake builds the driver (Maven on a cold cache, about 15
// seconds) and checks hello; hello needs no broker, since the driver
// creates its admin client on the first Kafka command.
func TestDriverHandshake(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the Java driver with Maven on a cold cache")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d, err := Open(ctx, "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("warm start (cache check, JVM, hello) in %v", time.Since(start).Round(time.Millisecond))
	if info := d.Info(); info.Library != "org.apache.kafka:kafka-clients "+kafkaClientsVersion || !strings.HasPrefix(info.Partitioner, "murmur2") {
		t.Errorf("hello reported %+v", info)
	}
	if err := d.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}
