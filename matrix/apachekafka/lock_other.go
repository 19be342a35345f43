//go:build !unix

package apachekafka

import (
	"context"
	"errors"
)

// lockFile is unsupported off Unix: the oracle is provisioned on Linux and macOS.
func lockFile(ctx context.Context, path string) (func(), error) {
	return nil, errors.New("apachekafka: provisioning Apache Kafka needs a Unix system (file locks)")
}
