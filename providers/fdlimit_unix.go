//go:build unix

package providers

import "syscall"

// openFileLimit is how many files this process may open (Go raises the
// soft limit to the hard one as it starts), or 0 if it cannot tell.
func openFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return uint64(lim.Cur)
}
