// Package python registers the Python matrix clients,
// "python-confluent-kafka" (confluent-kafka, librdkafka bundled) and
// "python-kafka-python" (kafka-python), as out-of-process drivers: one
// program, driver.py, speaking the line-delimited JSON protocol of
// matrix/README.md with either library, chosen by its argument.
//
// On first use Ensure creates a virtualenv in the cache
// ($CASCADE_CACHE_DIR/python/venv-<hash of requirements.txt and the
// interpreter>) and pip-installs the pinned requirements.txt from PyPI,
// under a file lock shared by parallel test binaries; later runs start
// the interpreter directly. A missing python3 or venv module fails with a
// message naming what to install. Importing the package (as
// matrix/driver/all does) registers both clients.
//
// The program is driver.py with the modules it imports, driver_common.py
// (errors, encoding) and driver_txn.py (transform and the transactional
// producers). They and requirements.txt are embedded in the Go binary and
// written into the cache ($CASCADE_CACHE_DIR/python/driver-<hash of the
// modules>/), so the drivers run from any working directory.
package python
