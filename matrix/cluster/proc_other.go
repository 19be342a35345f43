//go:build !linux

package cluster

import "os/exec"

// SetParentDeath has no portable equivalent off Linux; Close must be called.
func SetParentDeath(cmd *exec.Cmd) {}
