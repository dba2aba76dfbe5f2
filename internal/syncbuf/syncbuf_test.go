package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writes from many goroutines all land, whole, while a reader reads.
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				_, _ = b.Write([]byte("line\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := strings.Count(b.String(), "line\n"); got != 800 || b.Len() != 800*5 {
		t.Errorf("%d lines, %d bytes", got, b.Len())
	}
}
