# Cascade's broker image: a static binary of ./cmd/cascade on an empty base.
#
#   docker build -f docker/cascade.Dockerfile -t cascade/cascade:dev .
#   docker run --rm -p 9092:9092 cascade/cascade:dev
#   docker run --rm --network host cascade/cascade:dev \
#       --override advertised.listeners=PLAINTEXT://myhost:9092
#
# The broker listens on 0.0.0.0:9092 and keeps its data in /var/lib/cascade.
# Arguments after the image name are cascade's own flags; they replace the
# default advertised listener (PLAINTEXT://localhost:9092) and may override
# any other property, listeners included, since a later --override wins.
# GO_IMAGE is the toolchain image of the build stage (build context: the
# repository root).
ARG GO_IMAGE=golang:1.26-bookworm

FROM ${GO_IMAGE} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
# The standard library, compiled into the build cache in a layer that
# outlives changes to Cascade's sources (the flags match the build below).
RUN go build -trimpath std
COPY go.mod go.sum ./
COPY broker broker
COPY cmd/cascade cmd/cascade
RUN go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/cascade ./cmd/cascade \
 && /out/cascade -print-apis > /dev/null \
 && mkdir -p /out/data

FROM scratch
COPY --from=build /out/cascade /cascade
COPY --from=build --chown=65534:65534 /out/data /var/lib/cascade
USER 65534:65534
EXPOSE 9092
ENTRYPOINT ["/cascade", "--override", "listeners=PLAINTEXT://0.0.0.0:9092", "--override", "log.dirs=/var/lib/cascade"]
CMD ["--override", "advertised.listeners=PLAINTEXT://localhost:9092"]
