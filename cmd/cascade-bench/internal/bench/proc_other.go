//go:build !linux

package bench

import "os/exec"

// setParentDeath is Linux-only; elsewhere a started broker is stopped only
// by the tool's own shutdown.
func setParentDeath(*exec.Cmd) {}
