// Package container is the matrix's container runtime: with
// MATRIX_RUNTIME=container, every out-of-process driver (the Python and Java
// clients) runs in a container started through testcontainers-go instead of
// as a local process, and speaks the same line-delimited JSON protocol
// (matrix/README.md) over the container's attached stdin and stdout. The Go
// clients stay in process.
//
// Importing the package registers the runtime; the matrix tests import it:
//
//	import _ "github.com/cascade-kafka/cascade/matrix/driver/container"
//
//	MATRIX_RUNTIME=container MATRIX_TARGETS=cascade \
//	    MATRIX_CLIENTS=python-confluent-kafka,python-kafka-python,java \
//	    go test -run TestMatrix ./matrix/
//
// Containers use the host's network, so a driver reaches a broker on
// loopback exactly as a local process does. Each container is created with
// its stdin open once and removed automatically when it exits: Close sends
// close and ends stdin, the driver exits and Docker removes it. If the test
// process dies first, its end of the attach connection closes, the driver
// sees the end of its input and exits, and Docker removes it too, so no
// container outlives a run even without testcontainers' reaper (Ryuk),
// which this runtime disables unless TESTCONTAINERS_RYUK_DISABLED is set.
//
// Images are named by a hash of exactly the files they are built from
// (ImageTag), e.g. cascade/matrix-python:d68c53c1fac4, and reused while it
// exists; a missing one is built from docker/<name>.Dockerfile with the
// base images named by MATRIX_PYTHON_BASE_IMAGE, MATRIX_JAVA_BASE_IMAGE and
// MATRIX_JAVA_BUILD_IMAGE, or the Dockerfiles' public defaults.
// ci/docker-setup.sh prebuilds the same tags on machines without an image
// registry. MATRIX_PYTHON_IMAGE and MATRIX_JAVA_IMAGE name a ready image
// instead, skipping the hash and the build.
package container
