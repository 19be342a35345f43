#!/usr/bin/env bash
# Performance regression gate: compare two commits of Cascade on the
# broker's hot-path benchmarks and on a short load run.
#
# Usage: ci/benchcmp.sh [--warn] BASE HEAD
#
# Each commit is checked out in a git worktree of its own under a temporary
# directory. From each, the test binaries of the hot-path benchmarks are
# built once (go test -c) with cmd/cascade; the benchmarks then run -count
# times, one at a time, alternating which commit goes first, so that
# whatever else the machine does falls on both alike. Then both brokers
# take --client raw load runs of cmd/cascade-bench (built from HEAD, so
# the tool is the same on both sides), alternated the same way.
# benchstat (golang.org/x/perf, pinned below) reports the differences.
#
# A difference fails the gate when benchstat finds it significant (its
# Mann-Whitney test, p < 0.05) and it is worse than the noise band: time,
# bytes or allocations per op up by more than BENCHCMP_BAND percent, or a
# throughput (a unit ending in /s) down by more. With --warn the same
# differences are printed but the exit status is 0.
#
# Benchmarks (package: -bench pattern):
#   broker/log:     Append/*/append (Log.Append of 16 KiB and 1 MiB batches), AppendLZ4
#   broker/record:  Validate (CRC, records), ValidateLZ4
#   broker/handler: FetchEncode/regions (a fetch response around log regions)
#   broker/wire:    ReadRequest (reading a Produce request)
#
# Environment (defaults in brackets):
#   BENCHCMP_COUNT [6]          runs of each benchmark per commit
#   BENCHCMP_BENCHTIME [500ms]  -benchtime of each run
#   BENCHCMP_BAND [5]           noise band, percent, for the benchmarks
#   BENCHCMP_LOAD_BAND [10]     noise band, percent, for the load runs
#   BENCHCMP_LOAD_ROUNDS [6]    load runs per commit; 0 skips them
#   BENCHCMP_LOAD_ARGS          workload flags of the load runs
#                               [workload A's shape, 200,000 records]
#   BENCHCMP_KEEP               keep the temporary directory (set to 1)
# Needs: Go, git, python3 (to read the load tool's JSON and benchstat's CSV).
set -euo pipefail

BENCHSTAT="golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da"

warn=0
if [ "${1:-}" = "--warn" ]; then
  warn=1
  shift
fi
if [ $# -ne 2 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 2
fi
base_rev=$1
head_rev=$2
count=${BENCHCMP_COUNT:-6}
benchtime=${BENCHCMP_BENCHTIME:-500ms}
band=${BENCHCMP_BAND:-5}
load_band=${BENCHCMP_LOAD_BAND:-10}
load_rounds=${BENCHCMP_LOAD_ROUNDS:-6}
load_args=${BENCHCMP_LOAD_ARGS:---records 200000 --payload-bytes 1024 --partitions 8 --producers 4 --consumers 4 --compression lz4 --acks all --flush-ms 1000 --batch-bytes 131072}

root=$(git rev-parse --show-toplevel)
base_sha=$(git -C "$root" rev-parse --verify "$base_rev^{commit}")
head_sha=$(git -C "$root" rev-parse --verify "$head_rev^{commit}")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/benchcmp.XXXXXX")
cleanup() {
  for side in base head; do
    if [ -d "$tmp/$side" ]; then
      git -C "$root" worktree remove --force "$tmp/$side" >/dev/null 2>&1 || true
    fi
  done
  if [ -z "${BENCHCMP_KEEP:-}" ]; then
    rm -rf "$tmp"
  else
    echo "benchcmp: kept $tmp" >&2
  fi
}
trap cleanup EXIT

# package and -bench pattern, one pair per line
benches=(
  "broker/log" '^BenchmarkAppend$/KiB$/^append$'
  "broker/log" '^BenchmarkAppendLZ4$'
  "broker/record" '^BenchmarkValidate$'
  "broker/record" '^BenchmarkValidateLZ4$'
  "broker/handler" '^BenchmarkFetchEncode$/^regions$'
  "broker/wire" '^BenchmarkReadRequest$'
)

echo "benchcmp: base $base_sha, head $head_sha; load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo ?)" >&2
for side in base head; do
  sha=$base_sha
  [ "$side" = head ] && sha=$head_sha
  git -C "$root" worktree add --detach "$tmp/$side" "$sha" >/dev/null 2>&1
  mkdir -p "$tmp/bin/$side"
  echo "benchcmp: building $side ($sha)" >&2
  for ((i = 0; i < ${#benches[@]}; i += 2)); do
    pkg=${benches[i]}
    bin="$tmp/bin/$side/$(echo "$pkg" | tr / _).test"
    [ -x "$bin" ] || (cd "$tmp/$side" && go test -c -o "$bin" "./$pkg")
  done
  (cd "$tmp/$side" && go build -o "$tmp/bin/$side/cascade" ./cmd/cascade)
done
(cd "$tmp/head" && go build -o "$tmp/bin/cascade-bench" ./cmd/cascade-bench)

: >"$tmp/base.txt"
: >"$tmp/head.txt"
order() { if [ $(($1 % 2)) -eq 1 ]; then echo base head; else echo head base; fi; }
for ((run = 1; run <= count; run++)); do
  echo "benchcmp: benchmarks, run $run of $count" >&2
  for side in $(order "$run"); do
    for ((i = 0; i < ${#benches[@]}; i += 2)); do
      pkg=${benches[i]}
      bin="$tmp/bin/$side/$(echo "$pkg" | tr / _).test"
      (cd "$tmp/$side/$pkg" && "$bin" -test.run '^$' -test.bench "${benches[i + 1]}" -test.benchmem \
        -test.count 1 -test.benchtime "$benchtime") >>"$tmp/$side.txt"
    done
  done
done

# The load runs: one Cascade process per run, fresh data dir, the raw
# client. Each run becomes benchmark lines benchstat reads.
: >"$tmp/base-load.txt"
: >"$tmp/head-load.txt"
for ((run = 1; run <= load_rounds; run++)); do
  for side in $(order "$run"); do
    echo "benchcmp: load run $run of $load_rounds, $side" >&2
    # shellcheck disable=SC2086 # load_args is a list of flags
    (cd "$tmp/head" && "$tmp/bin/cascade-bench" --compare cascade --cascade-bin "$tmp/bin/$side/cascade" \
      --client raw --rounds 1 --no-limits --progress 0 --html '' --json "$tmp/load-$side-$run.json" \
      $load_args) >"$tmp/load-$side-$run.log" 2>&1 || {
      echo "benchcmp: load run failed ($side):" >&2
      tail -20 "$tmp/load-$side-$run.log" >&2
      exit 1
    }
    python3 - "$tmp/load-$side-$run.json" >>"$tmp/$side-load.txt" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
if not r["verified"]:
    sys.exit("load run not verified: %s" % r["verification"])
print("BenchmarkLoadRaw 1 %.0f produce-records/s %.0f consume-records/s %.4f broker-cpu-produce-s/GiB %.4f broker-cpu-consume-s/GiB"
      % (r["produce_records_per_s"], r["consume_records_per_s"], r["broker_cpu_produce_s_per_gib"], r["broker_cpu_consume_s_per_gib"]))
EOF
  done
done

benchstat() { (cd "$root" && go run "$BENCHSTAT" "$@"); }
echo
echo "== hot-path benchmarks: base $base_sha vs head $head_sha (-count $count, -benchtime $benchtime)"
benchstat "base=$tmp/base.txt" "head=$tmp/head.txt"
benchstat -format csv "base=$tmp/base.txt" "head=$tmp/head.txt" >"$tmp/bench.csv" 2>/dev/null
if [ "$load_rounds" -gt 0 ]; then
  echo
  echo "== load: --client raw against one cmd/cascade, $load_rounds runs each ($load_args)"
  benchstat "base=$tmp/base-load.txt" "head=$tmp/head-load.txt"
  benchstat -format csv "base=$tmp/base-load.txt" "head=$tmp/head-load.txt" >"$tmp/load.csv" 2>/dev/null
else
  : >"$tmp/load.csv"
fi

status=0
python3 - "$band" "$tmp/bench.csv" "$load_band" "$tmp/load.csv" "$load_rounds" <<'EOF' || status=$?
import csv, sys

def worse(path, band):
    """Rows benchstat marks significant and worse than band percent, and
    how many rows it compared."""
    out = []
    rows = 0
    unit = None
    for row in csv.reader(open(path)):
        if not row:
            continue
        # A section starts with its header: name, unit, CI, unit, CI, vs base, P.
        if len(row) >= 7 and row[5] == "vs base":
            unit = row[1]
            continue
        if unit is None or len(row) < 7 or row[0] in ("", "geomean"):
            continue
        rows += 1
        delta, p = row[5], row[6]
        if delta == "?" and p.startswith("p="):
            # From a zero base (allocations) benchstat gives no percentage.
            try:
                b, h, pval = float(row[1]), float(row[3]), float(p.split("=", 1)[1].split()[0])
            except ValueError:
                continue
            if pval < 0.05 and h > b and not unit.endswith("/s"):
                out.append("%s %s: %g -> %g (p=%.3f)" % (row[0], unit, b, h, pval))
            continue
        if not delta.endswith("%") or not p.startswith("p="):
            continue  # "~": no significant difference
        try:
            # From zero (allocations) benchstat says +Inf%.
            pct = float(delta.rstrip("%").replace("∞", "inf"))
            pval = float(p.split("=", 1)[1].split()[0])
        except ValueError:
            continue
        higher_better = unit.endswith("/s")
        bad = -pct if higher_better else pct
        if pval < 0.05 and bad > band:
            out.append("%s %s: %+.2f%% (p=%.3f), band %g%%" % (row[0], unit, pct, pval, band))
    return out, rows

found, rows = worse(sys.argv[2], float(sys.argv[1]))
load_found, load_rows = worse(sys.argv[4], float(sys.argv[3]))
if rows == 0 or (int(sys.argv[5]) > 0 and load_rows == 0):
    sys.exit("benchcmp: benchstat compared nothing (%d benchmark rows, %d load rows)" % (rows, load_rows))
found += load_found
print()
if found:
    print("benchcmp: REGRESSION beyond the noise band:")
    for f in found:
        print("  " + f)
    sys.exit(3)
print("benchcmp: no significant difference beyond the noise band")
EOF
if [ "$status" -ne 0 ] && [ "$warn" -eq 1 ]; then
  echo "benchcmp: --warn: not failing" >&2
  exit 0
fi
exit "$status"
