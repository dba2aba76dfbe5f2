// Package listen opens the sockets `switchboard serve` accepts clients on.
//
// A listening socket's queue of connections waiting to be accepted holds at
// most net.core.somaxconn of them (4,096 by default), and past that the
// kernel drops the client's handshake: the client retries after 1 s, then
// 3 s, then 7 s. A gateway whose CPUs are saturated by thousands of open
// streams runs its accept loop late, a goroutine among thousands that are
// runnable, and a burst of new clients overflows that queue (issue 22: at
// 9,700 streams opened within two seconds on two CPUs, the gateway's
// listener sat at 4,097 of 4,096 for seconds, and over a thousand clients
// came late by a second or more). On Linux the gateway therefore listens on
// one socket per CPU sharing the address (SO_REUSEPORT, as Envoy and
// nginx's `reuseport` do): the kernel spreads new connections over them,
// each with its own queue and its own accept loop.
package listen

import (
	"fmt"
	"net"
	"runtime"
)

// Sockets is how many sockets Listen opens: one per CPU the process may
// run on, at least two (one more queue costs a file and a goroutine), and
// one where the platform cannot share an address evenly.
func Sockets() int {
	if !shared {
		return 1
	}
	return max(runtime.GOMAXPROCS(0), 2)
}

// Listen listens on the TCP address addr with n sockets sharing it (n is
// clamped to 1 where the platform cannot share an address evenly). With
// port 0 the port is picked once, and every socket listens on it. Listen
// fails, as net.Listen does, if anything already listens on addr: the
// sockets share the address with one another, not with another process.
func Listen(addr string, n int) ([]net.Listener, error) {
	if !shared || n <= 1 {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		return []net.Listener{ln}, nil
	}
	// A socket that does not share the address binds only where nothing
	// listens, shared or not: it claims the address (and picks the port
	// for port 0), and is closed before the shared sockets bind there.
	probe, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	at := probe.Addr().String()
	if err := probe.Close(); err != nil {
		return nil, err
	}
	lns := make([]net.Listener, 0, n)
	for range n {
		ln, err := listenShared(at)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return nil, fmt.Errorf("listen %s: %w", at, err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}
