// Package cascadecontainer starts Cascade's broker image in a container
// through testcontainers-go, for users' own tests, in the style of
// testcontainers' Kafka module: Run starts it and Brokers returns the
// bootstrap address a Kafka client on this machine connects to.
//
//	ctr, err := cascadecontainer.Run(ctx, cascadecontainer.DefaultImage)
//	testcontainers.CleanupContainer(t, ctr)
//	if err != nil {
//		t.Fatal(err)
//	}
//	brokers, err := ctr.Brokers(ctx) // e.g. ["127.0.0.1:40517"]
//
// The image is built from docker/cascade.Dockerfile (ci/docker-setup.sh
// builds it as cascade/cascade:dev). By default the container's listener is
// published on a free port of the engine's loopback and advertised there,
// which works with Docker Desktop too; WithHostNetwork uses the host's
// network instead (Linux engines). WithOverride sets any broker property by
// Apache Kafka's name, as `cascade --override` does.
//
// Without an image registry, testcontainers' reaper (Ryuk) cannot be
// pulled: set TESTCONTAINERS_RYUK_DISABLED=true and remove containers with
// testcontainers.CleanupContainer or Terminate, as above.
package cascadecontainer
