//go:build unix

package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// portLock takes the machine-wide lock of port p for this process, which
// the kernel drops with the process should it die; ok is false when
// another holder has it. A second lock of the same port in this process
// fails too: flock locks belong to an open file, not a process.
func portLock(p int) (unlock func(), ok bool) {
	// One directory per user: another user's would not be writable.
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("switchboard-test-ports-%d", os.Getuid()))
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, false
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%d.lock", p)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, false
	}
	return func() { _ = f.Close() }, true
}
