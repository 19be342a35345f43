//go:build !linux

package apachekafka

import "os/exec"

// setParentDeath has no portable equivalent off Linux; Stop must be called.
func setParentDeath(cmd *exec.Cmd) {}
