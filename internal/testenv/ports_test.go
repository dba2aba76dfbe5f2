package testenv

import (
	"net"
	"strconv"
	"testing"
)

func TestListeningAddr(t *testing.T) {
	log := `{"time":"2026-12-02T12:00:00Z","level":"INFO","msg":"loading config","path":"x.yaml"}
not JSON at all
{"time":"2026-12-02T12:00:00Z","level":"INFO","msg":"switchboard listening","addr":"127.0.0.1:43121","graphs":["desk"],"store":"memory://"}
{"time":"2026-12-02T12:00:01Z","level":"INFO","msg":"switchboard listening","addr":"127.0.0.1:1"}
`
	if addr, ok := ListeningAddr(log); !ok || addr != "127.0.0.1:43121" {
		t.Fatalf("ListeningAddr = %q, %v; want the first listening line's address", addr, ok)
	}
	for _, partial := range []string{"", `{"msg":"switchboard listening"`, `{"msg":"switchboard listening","addr":""}`, `{"msg":"other","addr":"127.0.0.1:80"}`} {
		if addr, ok := ListeningAddr(partial); ok {
			t.Errorf("ListeningAddr(%q) = %q, want none yet", partial, addr)
		}
	}
}

func TestPrivatePortIsOutsideTheEphemeralRangeAndHeldUntilTheTestEnds(t *testing.T) {
	lo, hi := privateRange()
	seen := map[int]bool{}
	for range 50 {
		p := PrivatePort(t)
		if p < lo || p >= hi {
			t.Fatalf("port %d outside [%d, %d)", p, lo, hi)
		}
		if seen[p] {
			t.Fatalf("port %d given twice", p)
		}
		seen[p] = true
	}
	// Held: another process (or this one) cannot take it until the test
	// that got it ends.
	for p := range seen {
		if unlock, ok := portLock(p); ok {
			unlock()
			t.Fatalf("port %d could be taken again while held", p)
		}
	}
	var p0 int
	t.Run("sub", func(t *testing.T) { p0 = PrivatePort(t) })
	unlock, ok := portLock(p0)
	if !ok {
		t.Fatalf("port %d still held after its test ended", p0)
	}
	unlock()
	// A port is free when given: the server it is for can bind it.
	p := PrivatePort(t)
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("bind the port given: %v", err)
	}
	_ = ln.Close()
}

func TestRefusingAddrRefuses(t *testing.T) {
	addr := RefusingAddr(t)
	c, err := net.Dial("tcp", addr)
	if err == nil {
		c.Close()
		t.Fatalf("%s accepted a connection", addr)
	}
}

func TestPrivateRangeAvoidsTheKernelsEphemeralPorts(t *testing.T) {
	lo, hi := privateRange()
	if hi-lo < 2000 {
		t.Fatalf("range [%d, %d) too small", lo, hi)
	}
	// An outgoing connection's local port comes from the ephemeral range,
	// which the private one must not overlap (unless it had no room).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if p := ln.Addr().(*net.TCPAddr).Port; p >= lo && p < hi && !(lo == 10000 && hi == 65536) {
		t.Fatalf("the kernel gave port %d, inside the private range [%d, %d)", p, lo, hi)
	}
}
