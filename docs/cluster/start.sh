#!/usr/bin/env bash
# Starts a local three-node Cascade cluster from docs/cluster/node-*.properties:
# clients bootstrap from 127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096, data
# goes under data/node-1..3 of the repository root, every node's output is
# printed with its node as prefix. Ctrl-C stops all three cleanly (SIGTERM:
# controlled shutdown, data flushed).
#
# Usage: docs/cluster/start.sh [cascade flags for every node...]
#   e.g. docs/cluster/start.sh --override num.partitions=3
set -euo pipefail
cd "$(dirname "$0")/../.."

bin_dir=$(mktemp -d)
trap 'rm -rf "$bin_dir"' EXIT
go build -o "$bin_dir/cascade" ./cmd/cascade

# Each node in its own process group (job control), so that Ctrl-C reaches
# only this script, which then sends each node one SIGTERM: a second signal
# would end a node's clean stop.
set -m
pids=()
stop() {
  trap - INT TERM
  [ ${#pids[@]} -eq 0 ] || kill -TERM "${pids[@]}" 2>/dev/null || true
  wait
}
trap stop INT TERM
for n in 1 2 3; do
  # The prefixer ignores Ctrl-C and ends with its node's output: a node
  # must not lose its stdout (and die of SIGPIPE) while it stops.
  "$bin_dir/cascade" -config "docs/cluster/node-$n.properties" "$@" \
    > >(trap '' INT TERM; exec sed -u "s/^/node $n | /") 2>&1 &
  pids+=($!)
done
# The cluster runs until Ctrl-C, or until a node exits (then all stop).
status=0
wait -n "${pids[@]}" || status=$?
stop
exit "$status"
