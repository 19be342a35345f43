#!/usr/bin/env bash
# Prepare this machine for the container runtime of the matrix
# (MATRIX_RUNTIME=container) and for docker/cascadecontainer: a running
# Docker engine, local base images, and Cascade's images. Idempotent: a
# second run only checks, and rebuilds an image only when its inputs changed.
#
# Usage: ci/docker-setup.sh [--no-images]
#   --no-images   stop after the engine and the base images.
#
# For machines without an image registry (CI here), the base images are built
# locally: a Debian rootfs from debootstrap (the apt mirror of
# /etc/apt/sources.list*) imported with `docker import`, then the language
# runtimes added from apt. Certificates under /usr/local/share/ca-certificates
# are trusted inside them, so pip and Maven work through a TLS-inspecting
# proxy. The Dockerfiles in docker/ stay standard: on a machine with registry
# access `docker build` uses their public default bases instead.
#
#   cascade/debian:bookworm          minbase + ca-certificates
#   cascade/debian-python:bookworm   + python3, python3-venv
#   cascade/debian-java:bookworm     + openjdk-17-jre-headless
#   cascade/debian-maven:bookworm    + openjdk-17-jdk-headless, maven
#   cascade/golang:<host Go>         + this machine's Go toolchain
#
# Images built from docker/ (the tags the matrix and the tests look for):
#   cascade/cascade:dev                 docker/cascade.Dockerfile
#   cascade/matrix-python:<ctx hash>    docker/python.Dockerfile
#   cascade/matrix-java:<ctx hash>      docker/java.Dockerfile
# The context hash is defined in matrix/driver/container (ImageTag); the
# function context_hash below computes the same value, and a Go test holds
# the two equal.
#
# Environment: DOCKER_SETUP_TIMEOUT (seconds to wait for dockerd, default 60),
# DOCKERD_LOG (default /var/log/cascade-dockerd.log).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGES=1
case "${1:-}" in
  "") ;;
  --no-images) IMAGES=0 ;;
  --context-hash) ;; # handled below, once the function exists
  -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
  *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
esac

SUITE=bookworm
START=$(date +%s)
say() { printf 'docker-setup: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
elapsed() { echo "$(( $(date +%s) - START ))s"; }

# context_hash IMAGE prints the first 12 hex digits of the SHA-256 over the
# image's build inputs: for each file, in byte order of its path, the path,
# a newline, then its contents. Mirrors container.ContextHash.
context_files() {
  case "$1" in
    python)
      printf '%s\n' docker/python.Dockerfile matrix/clients/python/driver.py matrix/clients/python/driver_common.py \
        matrix/clients/python/driver_txn.py matrix/clients/python/requirements.txt ;;
    java)
      { echo docker/java.Dockerfile; echo matrix/clients/java/pom.xml; find matrix/clients/java/src -type f; } | LC_ALL=C sort ;;
    *) die "no context for image $1" ;;
  esac
}
context_hash() {
  local f
  context_files "$1" | LC_ALL=C sort | while IFS= read -r f; do
    printf '%s\n' "$f"
    cat "$f"
  done | sha256sum | cut -c1-12
}

# Hidden entry point for the Go test that compares the two implementations.
if [ "${1:-}" = "--context-hash" ]; then
  context_hash "$2"
  exit 0
fi

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# build LABEL ARGS... runs docker build with its output in a log file, shown
# (the end of it) only when the build fails.
build() {
  local what=$1 log
  shift
  log=$(mktemp /tmp/cascade-docker-build.XXXXXX)
  if ! docker build --force-rm --network host "$@" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    rm -f "$log"
    die "docker build of $what failed"
  fi
  rm -f "$log"
}

# 1. Packages.
export DEBIAN_FRONTEND=noninteractive
need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
# docker/cascadecontainer's TestComposeConfig validates docker/compose.yaml
# with a compose tool.
docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null || need+=(docker-compose)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt-get update -q >/dev/null
  apt-get install -y -q "${need[@]}" >/dev/null
fi

# 2. The engine.
if ! docker info >/dev/null 2>&1; then
  log="${DOCKERD_LOG:-/var/log/cascade-dockerd.log}"
  say "starting dockerd (log: $log)"
  # setsid detaches it from this script's process group, so it outlives the
  # script (CI runs the tests after it).
  setsid nohup dockerd >"$log" 2>&1 < /dev/null &
  limit=${DOCKER_SETUP_TIMEOUT:-60}
  for ((i = 0; i < limit; i++)); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { tail -n 20 "$log" >&2; die "dockerd did not answer within ${limit}s"; }
fi
say "engine: Docker $(docker version --format '{{.Server.Version}}') ($(elapsed))"

# 3. Local base images.
apt_mirror() {
  # The first Debian URI of the apt sources, deb822 or one-line style.
  local uri
  uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ && $2 ~ /debian\/?$/ {print $2; exit}')
  if [ -z "$uri" ]; then
    uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^(http|https|file):/ && $i ~ /debian\/?$/) { print $i; exit } }')
  fi
  [ -n "$uri" ] || die "no Debian mirror in /etc/apt/sources.list*; debootstrap needs one"
  echo "$uri"
}

# derive NAME builds a base image from a Dockerfile on stdin.
derive() {
  say "building base $1"
  build "$1" -t "$1" -
}

if ! have_image cascade/debian:$SUITE; then
  mirror=$(apt_mirror)
  root=$(mktemp -d /tmp/cascade-rootfs.XXXXXX)
  trap 'rm -rf "$root"' EXIT
  say "debootstrap $SUITE from $mirror (about a minute)"
  debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$root" "$mirror" >"$root.log" 2>&1 ||
    { tail -n 30 "$root.log" >&2; die "debootstrap failed"; }
  rm -f "$root.log"
  if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed in the rootfs"
  fi
  # pip reads its own CA bundle unless told to use the system's.
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$root/etc/pip.conf"
  chroot "$root" apt-get clean
  rm -rf "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' - cascade/debian:$SUITE >/dev/null
  rm -rf "$root"
  trap - EXIT
fi

if ! have_image cascade/debian-python:$SUITE; then
  derive cascade/debian-python:$SUITE <<EOF
FROM cascade/debian:$SUITE
RUN apt-get update -q && apt-get install -y -q --no-install-recommends python3 python3-venv \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
EOF
fi
if ! have_image cascade/debian-java:$SUITE; then
  derive cascade/debian-java:$SUITE <<EOF
FROM cascade/debian:$SUITE
RUN apt-get update -q && apt-get install -y -q --no-install-recommends openjdk-17-jre-headless \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
EOF
fi
if ! have_image cascade/debian-maven:$SUITE; then
  derive cascade/debian-maven:$SUITE <<EOF
FROM cascade/debian-java:$SUITE
RUN apt-get update -q && apt-get install -y -q --no-install-recommends openjdk-17-jdk-headless maven \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
EOF
fi

command -v go >/dev/null || die "go not found: the cascade image is built with this machine's Go toolchain"
GOROOT_DIR=$(go env GOROOT)
GO_VERSION=$(go env GOVERSION)
GO_IMAGE=cascade/golang:${GO_VERSION#go}
if ! have_image "$GO_IMAGE"; then
  say "building base $GO_IMAGE from $GOROOT_DIR"
  build "$GO_IMAGE" -t "$GO_IMAGE" -f - "$GOROOT_DIR" <<EOF
FROM cascade/debian:$SUITE
COPY . /usr/local/go
ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin GOTOOLCHAIN=local
EOF
fi
say "base images ready ($(elapsed))"
[ "$IMAGES" = 1 ] || exit 0

# 4. Cascade's images. The client images are skipped outright when their
# content-hash tag exists; Docker's layer cache makes an unchanged rebuild of
# the broker image a few seconds.
py=cascade/matrix-python:$(context_hash python)
if have_image "$py"; then
  say "$py is up to date"
else
  say "building $py"
  build "$py" -f docker/python.Dockerfile \
    --build-arg BASE_IMAGE=cascade/debian-python:$SUITE \
    --label org.cascade.context="${py##*:}" -t "$py" .
fi

java=cascade/matrix-java:$(context_hash java)
if have_image "$java"; then
  say "$java is up to date"
else
  say "building $java"
  build "$java" -f docker/java.Dockerfile \
    --build-arg BUILD_IMAGE=cascade/debian-maven:$SUITE \
    --build-arg BASE_IMAGE=cascade/debian-java:$SUITE \
    --label org.cascade.context="${java##*:}" -t "$java" .
fi
# Older client images (earlier driver sources) are removed: only the
# current hash is ever looked up.
for repo_tag in "$py" "$java"; do
  docker images "${repo_tag%%:*}" --format '{{.Repository}}:{{.Tag}}' |
    while IFS= read -r old; do
      [ "$old" = "$repo_tag" ] || docker rmi "$old" >/dev/null || say "could not remove $old (in use?)"
    done
done

say "building cascade/cascade:dev"
build cascade/cascade:dev -f docker/cascade.Dockerfile \
  --build-arg GO_IMAGE="$GO_IMAGE" -t cascade/cascade:dev .
say "images ready: cascade/cascade:dev $py $java ($(elapsed))"
