//go:build !unix

package testenv

import "sync"

// heldPorts stands in for the lock files where there is no flock: ports
// are then held against this process's other tests only.
var heldPorts sync.Map

// portLock takes port p for this process; ok is false when it has it.
func portLock(p int) (unlock func(), ok bool) {
	if _, loaded := heldPorts.LoadOrStore(p, true); loaded {
		return nil, false
	}
	return func() { heldPorts.Delete(p) }, true
}
