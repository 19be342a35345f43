//go:build !unix

package provision

import (
	"context"
	"errors"
)

// LockFile is unsupported off Unix: the client drivers are provisioned on
// Linux and macOS.
func LockFile(ctx context.Context, path string) (func(), error) {
	return nil, errors.New("provision: provisioning client drivers needs a Unix system (file locks)")
}
