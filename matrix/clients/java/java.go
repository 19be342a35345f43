package java

import (
	"context"
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/cascade-kafka/cascade/matrix/clients/provision"
	"github.com/cascade-kafka/cascade/matrix/driver"
)

// Client is the client id this package registers.
const Client = "java"

// sources is the Maven project: pom.xml and src/ (Driver.java and the
// logging configuration).
//
//go:embed pom.xml src
var sources embed.FS

func init() { driver.Register(Client, Open) }

// Open builds the driver on first use and starts one JVM running it,
// connected to bootstrap; the JVM lives until Close.
func Open(ctx context.Context, bootstrap string) (driver.Driver, error) {
	b, err := Ensure(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Client, err)
	}
	return driver.StartProcess(ctx, b.Spec(), bootstrap)
}

// Build is a compiled driver in the cache.
type Build struct {
	// Dir is the Maven project copied into the cache and built there.
	Dir string
	// Java is the runtime that runs it.
	Java string
}

// Classpath returns the driver's classes and its runtime dependencies
// (copied to target/lib by maven-dependency-plugin).
func (b *Build) Classpath() string {
	return filepath.Join(b.Dir, "target", "classes") + string(os.PathListSeparator) + filepath.Join(b.Dir, "target", "lib", "*")
}

// Spec returns the process spec that runs the driver. The JIT stops at C1
// (TieredStopAtLevel=1): a matrix run is short, so start-up matters more
// than peak speed.
func (b *Build) Spec() driver.ProcessSpec {
	return driver.ProcessSpec{
		Client: Client,
		Argv:   []string{b.Java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", b.Classpath(), "Driver"},
	}
}

// minJava is the Java release pom.xml compiles for: 17, which the Apache
// Kafka 4 oracle needs on this machine anyway (KIP-1013; kafka-clients
// alone would run on 11).
const minJava = 17

// Ensure returns the built driver, running `mvn -q -B package` on a copy of
// the embedded Maven project in the cache on first use, under a file lock.
// The build is keyed by a hash of pom.xml, the sources and the Java major
// version, so an edited driver or a pin bump rebuilds it.
func Ensure(ctx context.Context) (*Build, error) {
	java, major, err := provision.FindJava(ctx, minJava)
	if err != nil {
		return nil, err
	}
	cache, err := provision.CacheDir()
	if err != nil {
		return nil, err
	}
	key, err := provision.Hash(sources, "java "+strconv.Itoa(major))
	if err != nil {
		return nil, err
	}
	b := &Build{Dir: filepath.Join(cache, "java", "driver-"+key[:16]), Java: java}
	err = provision.Timed("Java driver "+b.Dir, func() (bool, error) {
		return provision.Once(ctx, b.Dir, key, func(dir string) error { return build(ctx, dir) })
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

func build(ctx context.Context, dir string) error {
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return provision.Missing("mvn not found in PATH; install Apache Maven 3.6+ (Debian: apt-get install maven) to build the Java matrix driver, or deselect it with MATRIX_CLIENTS")
	}
	if _, err := exec.LookPath("javac"); err != nil && os.Getenv("JAVA_HOME") == "" {
		return provision.Missing("javac not found in PATH; install a Java %d+ JDK, not only a JRE (Debian: apt-get install openjdk-17-jdk-headless)", minJava)
	}
	fmt.Fprintf(provision.Progress, "provision: building the Java matrix driver in %s (Maven, first run only)\n", dir)
	if err := provision.CopyFS(sources, dir); err != nil {
		return fmt.Errorf("java: copy sources: %w", err)
	}
	if _, err := provision.Run(ctx, dir, mvn, "-q", "-B", "-f", filepath.Join(dir, "pom.xml"), "package"); err != nil {
		return fmt.Errorf("java: build the driver (needs Maven Central): %w", err)
	}
	for _, p := range []string{"target/classes/Driver.class", "target/lib/kafka-clients-" + kafkaClientsVersion + ".jar"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return fmt.Errorf("java: Maven finished but %s is missing: %w", p, err)
		}
	}
	return nil
}

// kafkaClientsVersion is the kafka.version property of pom.xml; a test
// holds the two equal.
const kafkaClientsVersion = "4.4.0"
