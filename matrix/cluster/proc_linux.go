//go:build linux

package cluster

import (
	"os/exec"
	"syscall"
)

// SetParentDeath asks Linux to kill a node if the test process dies
// without closing its cluster, so a crashed test leaves no node behind.
func SetParentDeath(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
