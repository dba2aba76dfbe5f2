//go:build !unix

package mcptools

import (
	"os"
	"syscall"
	"time"
)

// terminateSignal asks a process to exit; without Unix signals, it kills.
var terminateSignal = os.Kill

// ownProcessGroup is a no-op where process groups are not Unix's.
func ownProcessGroup() *syscall.SysProcAttr { return nil }

// stopGroup is a no-op where process groups are not Unix's: only the
// server's own process is stopped.
func stopGroup(int, time.Duration) {}
