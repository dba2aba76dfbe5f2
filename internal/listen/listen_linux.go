package listen

import (
	"context"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// shared: Linux spreads a shared address's connections over its sockets.
const shared = true

// listenShared listens on addr with SO_REUSEPORT set.
func listenShared(addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(context.Background(), "tcp", addr)
}
