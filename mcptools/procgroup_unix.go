//go:build unix

package mcptools

import (
	"errors"
	"syscall"
	"time"
)

// terminateSignal asks a process to exit.
var terminateSignal = syscall.SIGTERM

// ownProcessGroup puts a stdio server in a process group of its own, whose
// id is its pid, so that stopGroup reaches its children too. It also keeps
// a terminal's Ctrl-C, meant for the gateway, from reaching the server
// before the gateway has closed it.
func ownProcessGroup() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// stopGroup ends what is left of process group pgid: SIGTERM, then SIGKILL
// after grace if any of it is still there.
func stopGroup(pgid int, grace time.Duration) {
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		return // no process left in the group
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}
