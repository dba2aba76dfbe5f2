package freshstack_test

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/freshstack"
)

// idleTop is the top function of an idle worker as goroutine dumps name
// it, which testenv.IgnoreIdleWorkers gives goleak: the leak checks of
// the packages that use freshstack ignore idle workers by it.
const idleTop = "github.com/switchboard-ai/switchboard/internal/freshstack.(*worker).nextCall("

// Right after a call, its worker waits idle under that name.
func TestIdleWorkerTopFunction(t *testing.T) {
	freshstack.Run(func() {})
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		dump := buf[:runtime.Stack(buf, true)]
		for g := range bytes.SplitSeq(dump, []byte("\n\n")) {
			lines := bytes.SplitN(g, []byte("\n"), 3)
			if len(lines) > 1 && bytes.HasPrefix(lines[1], []byte(idleTop)) {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no goroutine whose top function is %s", idleTop)
}
