#!/usr/bin/env bash
# Start a single-node Apache Kafka (combined broker + controller, KRaft) in the
# foreground, from the same Maven-resolved jars the matrix uses
# (matrix/apachekafka). Prints the bootstrap address; Ctrl-C stops it.
#
# Usage: ci/apache-kafka.sh [-p PORT] [-d DIR] [--override key=value ...] [--cluster N]
#   -p PORT   PLAINTEXT port on 127.0.0.1 (default 9092); the controller
#             listens on PORT+1.
#   -d DIR    log dir and config directory (default: a new temp dir, removed
#             on exit).
#   --override key=value   extra server.properties entry (repeatable).
#   --cluster N   start an N-node KRaft cluster instead (every node broker
#             and controller, on free loopback ports), through
#             matrix/apachekafka/cmd/apache-kafka-cluster: it prints the
#             bootstrap list and takes kill/stop/pause/resume/restart ID on
#             standard input. Needs Go; -p does not apply.
#
# Environment: CASCADE_CACHE_DIR (default ~/.cache/cascade),
# CASCADE_KAFKA_VERSION (default below), JAVA_HOME.
# Needs: Java 17+, and Maven on first use to download the jars.
set -euo pipefail

KAFKA_VERSION="${CASCADE_KAFKA_VERSION:-4.4.0}"
LOG4J_VERSION="2.25.3"
PORT=9092
DIR=""
OVERRIDES=()
CLUSTER=""

while [ $# -gt 0 ]; do
  case "$1" in
    -p) PORT="$2"; shift 2 ;;
    -d) DIR="$2"; shift 2 ;;
    --override) OVERRIDES+=("$2"); shift 2 ;;
    --cluster) CLUSTER="$2"; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ -n "$CLUSTER" ]; then
  ARGS=(-nodes "$CLUSTER")
  case "$DIR" in "" | /*) ;; *) DIR="$PWD/$DIR" ;; esac
  if [ -n "$DIR" ]; then ARGS+=(-d "$DIR"); fi
  for o in "${OVERRIDES[@]+"${OVERRIDES[@]}"}"; do ARGS+=(-override "$o"); done
  cd "$(dirname "$0")/.."
  exec go run ./matrix/apachekafka/cmd/apache-kafka-cluster "${ARGS[@]}"
fi

JAVA="java"
if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then JAVA="$JAVA_HOME/bin/java"; fi
command -v "$JAVA" >/dev/null || { echo "java not found: install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless)" >&2; exit 1; }

CACHE="${CASCADE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cascade}"
if [ "$(uname)" = "Darwin" ] && [ -z "${CASCADE_CACHE_DIR:-}" ]; then CACHE="$HOME/Library/Caches/cascade"; fi
DIST="$CACHE/apache-kafka/$KAFKA_VERSION"
mkdir -p "$CACHE/apache-kafka"

# Resolve the jars once, under the same lock file the Go provisioning uses.
if [ ! -f "$DIST/complete" ]; then
  command -v mvn >/dev/null || { echo "mvn not found: install Apache Maven (Debian: apt-get install maven) to download Apache Kafka $KAFKA_VERSION" >&2; exit 1; }
  exec 9>"$DIST.lock"
  flock 9
  if [ ! -f "$DIST/complete" ]; then
    rm -rf "$DIST" && mkdir -p "$DIST"
    {
      echo '<?xml version="1.0" encoding="UTF-8"?>'
      echo '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
      echo '<groupId>io.github.cascade-kafka</groupId><artifactId>apache-kafka-oracle</artifactId><version>1</version><packaging>pom</packaging><dependencies>'
      for a in "org.apache.kafka:kafka_2.13:$KAFKA_VERSION" "org.apache.kafka:kafka-tools:$KAFKA_VERSION" \
               "org.apache.kafka:kafka-storage:$KAFKA_VERSION" "org.apache.kafka:kafka-server:$KAFKA_VERSION" \
               "org.apache.logging.log4j:log4j-api:$LOG4J_VERSION" "org.apache.logging.log4j:log4j-core:$LOG4J_VERSION" \
               "org.apache.logging.log4j:log4j-slf4j-impl:$LOG4J_VERSION"; do
        IFS=: read -r g n v <<<"$a"
        echo "<dependency><groupId>$g</groupId><artifactId>$n</artifactId><version>$v</version></dependency>"
      done
      echo '</dependencies></project>'
    } >"$DIST/pom.xml"
    cat >"$DIST/log4j2.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
EOF
    echo "downloading Apache Kafka $KAFKA_VERSION jars with Maven into $DIST ..." >&2
    mvn -q -B -f "$DIST/pom.xml" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$DIST/libs"
    # The same stamp as matrix/apachekafka's cacheStamp: either fills the cache for the other.
    echo "kafka $KAFKA_VERSION log4j $LOG4J_VERSION layout 1" >"$DIST/complete"
  fi
  exec 9>&-
fi

CP="$DIST/libs/*"
if [ -z "$DIR" ]; then
  DIR="$(mktemp -d -t apache-kafka-XXXXXX)"
  trap 'rm -rf "$DIR"' EXIT
fi
mkdir -p "$DIR"
CTRL=$((PORT + 1))
{
  echo "process.roles=broker,controller"
  echo "node.id=1"
  echo "listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CTRL"
  echo "advertised.listeners=PLAINTEXT://127.0.0.1:$PORT"
  echo "controller.listener.names=CONTROLLER"
  echo "inter.broker.listener.name=PLAINTEXT"
  echo "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
  echo "controller.quorum.voters=1@127.0.0.1:$CTRL"
  echo "log.dirs=$DIR/data"
  echo "num.partitions=1"
  echo "offsets.topic.replication.factor=1"
  echo "offsets.topic.num.partitions=1"
  echo "transaction.state.log.replication.factor=1"
  echo "transaction.state.log.min.isr=1"
  echo "transaction.state.log.num.partitions=1"
  echo "share.coordinator.state.topic.replication.factor=1"
  echo "share.coordinator.state.topic.min.isr=1"
  echo "group.initial.rebalance.delay.ms=0"
  for o in "${OVERRIDES[@]+"${OVERRIDES[@]}"}"; do echo "$o"; done
} >"$DIR/server.properties"

if [ ! -f "$DIR/data/meta.properties" ]; then
  CLUSTER_ID="$("$JAVA" -cp "$CP" kafka.tools.StorageTool random-uuid)"
  "$JAVA" -Xmx256m -cp "$CP" -Dlog4j2.configurationFile="$DIST/log4j2.properties" \
    kafka.tools.StorageTool format -t "$CLUSTER_ID" -c "$DIR/server.properties" >/dev/null
fi

echo "Apache Kafka $KAFKA_VERSION: bootstrap 127.0.0.1:$PORT (dir $DIR)" >&2
"$JAVA" -Xmx512m -Xms128m -XX:+UseG1GC -Djava.awt.headless=true \
  -Dlog4j2.configurationFile="$DIST/log4j2.properties" \
  -cp "$CP" kafka.Kafka "$DIR/server.properties"
