package apachekafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cascade-kafka/cascade/matrix/clients/provision"

	"github.com/cascade-kafka/cascade/matrix/cluster"
)

// DefaultVersion is the Apache Kafka release the oracle runs: the newest 4.x
// that Maven Central serves. CASCADE_KAFKA_VERSION overrides it.
const DefaultVersion = "4.4.0"

// log4jVersion pins the log4j2 binding: Kafka 4 logs through slf4j 1.7 and
// ships log4j2 configuration (KIP-653), so log4j-slf4j-impl is its binding.
const log4jVersion = "2.25.3"

// Artifacts lists the Maven coordinates (groupId:artifactId:version) that
// make up a distribution: the broker, its tools, the storage tool and a
// logging binding. ci/apache-kafka.sh carries the same list.
func Artifacts(version string) []string {
	return []string{
		"org.apache.kafka:kafka_2.13:" + version,
		"org.apache.kafka:kafka-tools:" + version,
		"org.apache.kafka:kafka-storage:" + version,
		"org.apache.kafka:kafka-server:" + version,
		"org.apache.logging.log4j:log4j-api:" + log4jVersion,
		"org.apache.logging.log4j:log4j-core:" + log4jVersion,
		"org.apache.logging.log4j:log4j-slf4j-impl:" + log4jVersion,
	}
}

// ErrToolMissing reports that java or mvn is not installed.
var ErrToolMissing = errors.New("apachekafka: required tool missing")

// Dist is a resolved Apache Kafka distribution: a directory of jars and the
// Java runtime that runs them.
type Dist struct {
	version string
	dir     string
	java    string
}

// Version returns the Apache Kafka version, such as "4.4.0".
func (d *Dist) Version() string { return d.version }

// Dir returns the cache directory holding pom.xml and libs/.
func (d *Dist) Dir() string { return d.dir }

// Classpath returns the Java classpath of the distribution (a wildcard).
func (d *Dist) Classpath() string { return filepath.Join(d.dir, "libs", "*") }

// CacheDir returns $CASCADE_CACHE_DIR, or os.UserCacheDir()/cascade.
func CacheDir() (string, error) {
	if d := os.Getenv("CASCADE_CACHE_DIR"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("apachekafka: no cache dir (set CASCADE_CACHE_DIR): %w", err)
	}
	return filepath.Join(base, "cascade"), nil
}

// Ensure returns the pinned distribution (DefaultVersion, or
// CASCADE_KAFKA_VERSION when set), resolving it with Maven on first use.
func Ensure(ctx context.Context) (*Dist, error) {
	v := os.Getenv("CASCADE_KAFKA_VERSION")
	if v == "" {
		v = DefaultVersion
	}
	return EnsureVersion(ctx, v)
}

var versionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[A-Za-z0-9.]+)?$`)

// EnsureVersion returns the given Apache Kafka version, resolving its jars
// with `mvn dependency:copy-dependencies` into the cache on first use. A file
// lock serialises concurrent callers across processes; the second one waits
// and then finds the cache complete.
func EnsureVersion(ctx context.Context, version string) (*Dist, error) {
	if !versionRE.MatchString(version) {
		return nil, fmt.Errorf("apachekafka: invalid version %q", version)
	}
	java, err := findJava(ctx)
	if err != nil {
		return nil, err
	}
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(cache, "apache-kafka")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("apachekafka: create cache: %w", err)
	}
	dir := filepath.Join(root, version)
	d := &Dist{version: version, dir: dir, java: java}

	pom := pomXML(version)
	stamp := cacheStamp(version)
	if complete(dir, stamp) {
		return d, d.writeConfigs()
	}

	unlock, err := provision.LockFile(ctx, dir+".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if complete(dir, stamp) { // Another process finished while we waited.
		return d, d.writeConfigs()
	}
	if err := resolve(ctx, dir, pom, version); err != nil {
		return nil, err
	}
	if err := d.writeConfigs(); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "complete"), []byte(stamp+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("apachekafka: mark cache complete: %w", err)
	}
	return d, nil
}

// cacheStamp names what a complete cache directory holds; ci/apache-kafka.sh
// writes the same stamp, so either may fill the cache for the other.
func cacheStamp(version string) string {
	return "kafka " + version + " log4j " + log4jVersion + " layout 1"
}

// writeConfigs writes the log4j2 files when missing or different, through a
// rename so a concurrent reader never sees half a file.
func (d *Dist) writeConfigs() error {
	for name, body := range map[string]string{
		"log4j2.properties":      log4jBroker,
		"log4j2-tool.properties": log4jTool,
	} {
		p := filepath.Join(d.dir, name)
		if old, err := os.ReadFile(p); err == nil && string(old) == body {
			continue
		}
		tmp, err := os.CreateTemp(d.dir, name+".tmp*")
		if err != nil {
			return fmt.Errorf("apachekafka: write %s: %w", name, err)
		}
		_, werr := tmp.WriteString(body)
		cerr := tmp.Close()
		if werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Rename(tmp.Name(), p)
		}
		if werr != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("apachekafka: write %s: %w", name, werr)
		}
	}
	return nil
}

// complete reports whether dir holds a finished resolution of the pom whose
// hash is stamp.
func complete(dir, stamp string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "complete"))
	return err == nil && strings.TrimSpace(string(b)) == stamp
}

func resolve(ctx context.Context, dir, pom, version string) error {
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return fmt.Errorf("%w: mvn not found in PATH; install Apache Maven 3.6+ (Debian: apt-get install maven) to download Apache Kafka %s from Maven Central", ErrToolMissing, version)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("apachekafka: clear stale cache: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("apachekafka: create cache: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pom.xml"), []byte(pom), 0o644); err != nil {
		return fmt.Errorf("apachekafka: write pom.xml: %w", err)
	}
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "-f", filepath.Join(dir, "pom.xml"),
		"dependency:copy-dependencies", "-DincludeScope=runtime",
		"-DoutputDirectory="+filepath.Join(dir, "libs"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("apachekafka: mvn dependency:copy-dependencies for Kafka %s: %w\n%s", version, err, cluster.Tail(out.String(), 4000))
	}
	jar := filepath.Join(dir, "libs", "kafka_2.13-"+version+".jar")
	if _, err := os.Stat(jar); err != nil {
		return fmt.Errorf("apachekafka: Maven finished but %s is missing: %w", jar, err)
	}
	return nil
}

func pomXML(version string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by github.com/cascade-kafka/cascade/matrix/apachekafka. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.github.cascade-kafka</groupId>
  <artifactId>apache-kafka-oracle</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
`)
	for _, a := range Artifacts(version) {
		p := strings.Split(a, ":")
		fmt.Fprintf(&b, "    <dependency><groupId>%s</groupId><artifactId>%s</artifactId><version>%s</version></dependency>\n", p[0], p[1], p[2])
	}
	b.WriteString("  </dependencies>\n</project>\n")
	return b.String()
}

// log4jBroker sends the broker's log to stdout, which StartBroker writes to
// its log file.
const log4jBroker = `status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
`

// log4jTool keeps a tool's stdout for its output: warnings go to stderr.
const log4jTool = `status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
`

// findJava locates a Java 17+ runtime: $JAVA_HOME/bin/java, else java on
// PATH. Kafka 4 brokers and tools need Java 17 (KIP-1013).
func findJava(ctx context.Context) (string, error) {
	java := ""
	if h := os.Getenv("JAVA_HOME"); h != "" {
		if p := filepath.Join(h, "bin", "java"); fileExists(p) {
			java = p
		}
	}
	if java == "" {
		p, err := exec.LookPath("java")
		if err != nil {
			return "", fmt.Errorf("%w: java not found in PATH or JAVA_HOME; install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless) to run Apache Kafka", ErrToolMissing)
		}
		java = p
	}
	out, err := exec.CommandContext(ctx, java, "-version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("apachekafka: %s -version: %w: %s", java, err, cluster.Tail(string(out), 500))
	}
	major, ok := javaMajor(string(out))
	if !ok {
		return "", fmt.Errorf("apachekafka: cannot read the Java version from %q", cluster.Tail(string(out), 200))
	}
	if major < 17 {
		return "", fmt.Errorf("%w: %s is Java %d; Apache Kafka 4 needs Java 17+ (Debian: apt-get install openjdk-17-jre-headless)", ErrToolMissing, java, major)
	}
	return java, nil
}

var javaVersionRE = regexp.MustCompile(`version "([0-9]+)(?:\.([0-9]+))?`)

// javaMajor parses the major version from `java -version` output, where
// Java 8 and older print "1.8.0_x".
func javaMajor(s string) (int, bool) {
	m := javaVersionRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, false
	}
	if n == 1 && m[2] != "" {
		n, err = strconv.Atoi(m[2])
		if err != nil {
			return 0, false
		}
	}
	return n, true
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Run runs a Kafka main class (for example "org.apache.kafka.tools.TopicCommand")
// from the distribution and returns its standard output. Tool logging goes to
// standard error, which is returned inside the error when the tool fails.
func (d *Dist) Run(ctx context.Context, mainClass string, args ...string) ([]byte, error) {
	argv := append([]string{
		"-Xmx256m", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-Dlog4j2.configurationFile=" + filepath.Join(d.dir, "log4j2-tool.properties"),
		"-cp", d.Classpath(), mainClass,
	}, args...)
	cmd := exec.CommandContext(ctx, d.java, argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("apachekafka: %s %s: %w\nstdout:\n%s\nstderr:\n%s",
			mainClass, strings.Join(args, " "), err, cluster.Tail(stdout.String(), 2000), cluster.Tail(stderr.String(), 4000))
	}
	return stdout.Bytes(), nil
}

// DumpLogSegmentsClass is Kafka 4's log dump tool (kafka-dump-log.sh).
const DumpLogSegmentsClass = "org.apache.kafka.tools.DumpLogSegments"

// DumpLog runs kafka-dump-log with --deep-iteration --print-data-log over the
// given segment, index or snapshot files and returns its output. It is how
// tests prove that a file Cascade wrote is one Apache Kafka can read.
func (d *Dist) DumpLog(ctx context.Context, files ...string) (string, error) {
	if len(files) == 0 {
		return "", errors.New("apachekafka: DumpLog needs at least one file")
	}
	for _, f := range files {
		if strings.Contains(f, ",") {
			return "", fmt.Errorf("apachekafka: DumpLog file name %q contains a comma", f)
		}
	}
	out, err := d.Run(ctx, DumpLogSegmentsClass, "--deep-iteration", "--print-data-log", "--files", strings.Join(files, ","))
	return string(out), err
}
