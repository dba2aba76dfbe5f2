package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// SlowRelay relays connections to the TCP server at addr, and delays what
// it answers by delay: a server that far away, or, as under load, a client
// whose goroutines wait that long for a CPU. Each round trip takes delay,
// whatever it carries. It returns the relay's address; the relay stops
// with the test.
func SlowRelay(t testing.TB, addr string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		conns.Wait()
	})
	relay := func(c net.Conn) {
		defer c.Close()
		r, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		defer r.Close()
		go func() {
			_, _ = io.Copy(r, c)
			_ = r.Close()
		}()
		type chunk struct {
			at time.Time
			b  []byte
		}
		chunks := make(chan chunk, 1024)
		go func() {
			defer close(chunks)
			for {
				b := make([]byte, 64<<10)
				n, err := r.Read(b)
				if n > 0 {
					chunks <- chunk{time.Now(), b[:n]}
				}
				if err != nil {
					return
				}
			}
		}()
		for ch := range chunks {
			time.Sleep(time.Until(ch.at.Add(delay)))
			if _, err := c.Write(ch.b); err != nil {
				_ = r.Close()
			}
		}
	}
	conns.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { relay(c) })
		}
	})
	return ln.Addr().String()
}
