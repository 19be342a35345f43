//go:build linux

package bench

import (
	"os/exec"
	"syscall"
)

// setParentDeath asks Linux to kill a started broker if the tool dies
// without stopping it, so an interrupted benchmark leaves nothing running.
func setParentDeath(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
