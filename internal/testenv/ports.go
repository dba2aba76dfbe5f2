package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"testing"
)

// A test that picks a free port, closes it and hands it to a child process
// races every socket the machine opens in between: the kernel gives the
// same ephemeral ports to bind(0) and to outgoing connections, and the
// suites run their packages in parallel, each making connections by the
// thousand. Lost, the child fails to bind, or a test talks to another
// test's server; a port left closed, for a test of a refused connection,
// may be opened by another test meanwhile. So a gateway is started on port
// 0 and its address read from its log (ListeningAddr); a server that
// cannot take a port of the kernel's choosing, or that a test restarts on
// the same port, and a port that must stay closed, get one outside the
// ephemeral range that only this test holds (PrivatePort, RefusingAddr).

// ListeningAddr returns the address in the "switchboard listening" line of
// a gateway's log (JSON lines, as `switchboard serve` writes to stderr),
// if the log holds it yet.
func ListeningAddr(log string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "switchboard listening" && rec.Addr != "" {
			return rec.Addr, true
		}
	}
	return "", false
}

// PrivatePort returns a loopback port nothing listens on, outside the
// kernel's ephemeral range (net.ipv4.ip_local_port_range), held for the
// test until it ends: no socket the machine opens takes it by chance, so a
// server can be started on it, restarted on it, or left off it for a test
// of a refused connection. Test processes choose among such ports at
// random and hold each by a lock file (portLock), so that two packages
// running at once never get the same one.
func PrivatePort(t testing.TB) int {
	t.Helper()
	lo, hi := privateRange()
	for range 1000 {
		p := lo + rand.IntN(hi-lo)
		unlock, ok := portLock(p)
		if !ok {
			continue // another test holds it
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			unlock()
			continue // a service of the machine listens there
		}
		_ = ln.Close()
		t.Cleanup(unlock)
		return p
	}
	t.Fatalf("no free loopback port in %d-%d", lo, hi-1)
	return 0
}

// RefusingAddr returns a loopback address that refuses connections for as
// long as the test runs (a PrivatePort nothing is started on).
func RefusingAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", PrivatePort(t))
}

// privateRange is the ports PrivatePort picks from, [lo, hi): the room
// below the ephemeral range, or else above it.
func privateRange() (lo, hi int) {
	ephLo, ephHi := 32768, 60999 // Linux's default
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var a, z int
		if n, _ := fmt.Sscan(string(b), &a, &z); n == 2 && a > 0 && z >= a {
			ephLo, ephHi = a, z
		}
	}
	const floor = 10000 // below: well-known services' ports
	if ephLo-floor >= 2000 {
		return floor, ephLo
	}
	if 65536-(ephHi+1) >= 2000 {
		return ephHi + 1, 65536
	}
	// The ephemeral range covers nearly everything: share it, and the
	// race, as before.
	return floor, 65536
}
