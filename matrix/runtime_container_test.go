package matrix_test

// The container runtime: with MATRIX_RUNTIME=container the Python and Java
// drivers run in containers through testcontainers-go (docker/README.md).
import _ "github.com/cascade-kafka/cascade/matrix/driver/container"
