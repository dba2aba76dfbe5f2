//go:build !linux

package listen

import (
	"errors"
	"net"
)

// shared: elsewhere (the BSDs, macOS) SO_REUSEPORT does not spread
// connections evenly, so one socket serves.
const shared = false

func listenShared(string) (net.Listener, error) {
	return nil, errors.New("shared listening sockets need Linux")
}
