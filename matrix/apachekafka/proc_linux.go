//go:build linux

package apachekafka

import (
	"os/exec"
	"syscall"
)

// setParentDeath asks Linux to kill the broker if the test process dies
// without calling Stop, so a crashed test leaves no JVM behind.
func setParentDeath(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
