package listen

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// accept accepts on ln until it is closed, counting what it accepted.
func accept(ln net.Listener, n *int, mu *sync.Mutex) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		mu.Lock()
		*n++
		mu.Unlock()
		c.Close()
	}
}

// TestSocketsShareTheAddress: on Linux the sockets listen on one port, and
// the kernel spreads clients over them; each accepts its own.
func TestSocketsShareTheAddress(t *testing.T) {
	lns, err := Listen("127.0.0.1:0", 2)
	if err != nil {
		t.Fatal(err)
	}
	if !shared {
		if len(lns) != 1 {
			t.Fatalf("%d sockets where the address cannot be shared", len(lns))
		}
		lns[0].Close()
		t.Skip("one socket on this platform")
	}
	if len(lns) != 2 {
		t.Fatalf("%d sockets, want 2", len(lns))
	}
	addr := lns[0].Addr().String()
	if got := lns[1].Addr().String(); got != addr || strings.HasSuffix(addr, ":0") {
		t.Fatalf("the sockets listen on %s and %s", addr, got)
	}
	var mu sync.Mutex
	counts := make([]int, len(lns))
	var wg sync.WaitGroup
	for i, ln := range lns {
		wg.Go(func() { accept(ln, &counts[i], &mu) })
	}
	// Each client comes from a port of its own, which the kernel hashes to
	// pick a socket: 64 clients all on one of two sockets would be a
	// chance of one in 2^63.
	const clients = 64
	for range clients {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		total := counts[0] + counts[1]
		mu.Unlock()
		if total == clients || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, ln := range lns {
		ln.Close()
	}
	wg.Wait()
	if counts[0]+counts[1] != clients || counts[0] == 0 || counts[1] == 0 {
		t.Fatalf("accepted %v of %d clients: want all, on both sockets", counts, clients)
	}
}

// TestListenRefusesAnAddressInUse: the sockets share the address with one
// another only. A second gateway started on the same address fails, as it
// did with one socket, whether the first listens with one or with several.
func TestListenRefusesAnAddressInUse(t *testing.T) {
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if lns, err := Listen(plain.Addr().String(), 2); err == nil {
		for _, ln := range lns {
			ln.Close()
		}
		t.Fatalf("listened on %s, which a plain socket holds", plain.Addr())
	}

	first, err := Listen("127.0.0.1:0", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, ln := range first {
			ln.Close()
		}
	}()
	for _, n := range []int{1, 2} {
		if lns, err := Listen(first[0].Addr().String(), n); err == nil {
			for _, ln := range lns {
				ln.Close()
			}
			t.Fatalf("%d socket(s) listened on %s beside another gateway's", n, first[0].Addr())
		} else if !strings.Contains(err.Error(), "address already in use") {
			t.Errorf("error %q does not say the address is in use", err)
		}
	}
}

// TestSocketsFreeTheAddress: once every socket is closed, the address can
// be listened on again (a restart on the same port).
func TestSocketsFreeTheAddress(t *testing.T) {
	lns, err := Listen("127.0.0.1:0", 3)
	if err != nil {
		t.Fatal(err)
	}
	addr := lns[0].Addr().String()
	for _, ln := range lns {
		ln.Close()
	}
	again, err := Listen(addr, 3)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	for _, ln := range again {
		ln.Close()
	}
}
