//go:build !unix

package provision

import (
	"context"
	"errors"
)

// lockFile is unsupported off Unix: the client drivers are provisioned on
// Linux and macOS.
func lockFile(ctx context.Context, path string) (func(), error) {
	return nil, errors.New("provision: provisioning client drivers needs a Unix system (file locks)")
}
