package providers

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
)

// poolServer streams a short answer; each request waits until `together`
// requests are in (so that they hold that many connections at once). It
// counts the connections opened and closed.
type poolServer struct {
	srv            *httptest.Server
	opened, closed atomic.Int32
	mu             sync.Mutex
	waiting        int
	together       int
	all            chan struct{}
}

func newPoolServer(t *testing.T) *poolServer {
	s := &poolServer{}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.waiting++
		if s.waiting == s.together {
			close(s.all)
		}
		all := s.all
		s.mu.Unlock()
		select {
		case <-all:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closed.Add(1)
		}
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

// calls makes n streamed calls at once, each on a connection of its own,
// and returns once every connection is back in the pool.
func (s *poolServer) calls(t *testing.T, r *Registry, n int) {
	t.Helper()
	s.mu.Lock()
	s.waiting, s.together, s.all = 0, n, make(chan struct{})
	s.mu.Unlock()
	idle := make(chan struct{}, n)
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{PutIdleConn: func(err error) {
		idle <- struct{}{} // back in the pool, or closed at once (err)
	}})
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := r.Chat(ctx, userRequest("hello", true), nil)
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		select {
		case <-idle:
		case <-time.After(10 * time.Second):
			t.Fatal("a connection never went back to the pool")
		}
	}
}

// trimRegistry calls s, and its trim waits quiet between checks.
func trimRegistry(t *testing.T, s *poolServer, quiet time.Duration) *Registry {
	t.Helper()
	p := graphs.Provider{Name: "fake", Kind: graphs.ProviderOpenAI, BaseURL: s.srv.URL, APIKey: "sk-test", Timeout: 10 * time.Second}
	r, err := New(map[string]graphs.Provider{"fake": p}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	u := r.upstreams[0]
	u.drainWait = time.Minute // reuse, not the drain window, is tested here
	u.trim.quiet = quiet
	return r
}

// TestBurstConnectionsClose: the connections a burst of calls opened close
// once no call came for a while, though the provider keeps its side open:
// a gateway left alone after thousands of streams goes back to the
// goroutines it had before them (issue 22). The calls after that open a
// connection and reuse it again. The test makes the trim's checks itself
// (its timer waits an hour), so that when they come does not depend on how
// fast the machine is.
func TestBurstConnectionsClose(t *testing.T) {
	s := newPoolServer(t)
	r := trimRegistry(t, s, time.Hour)
	n := trimFloor + 4
	s.calls(t, r, n)
	if got := s.opened.Load(); got != int32(n) {
		t.Fatalf("%d calls at once opened %d connections, want %d", n, got, n)
	}
	trim := r.upstreams[0].trim
	trim.check() // the burst's period: no trim
	if got := s.closed.Load(); got != 0 {
		t.Fatalf("%d connections closed in a period with calls, want 0", got)
	}
	trim.check() // a quiet period
	deadline := time.Now().Add(10 * time.Second)
	for s.closed.Load() != int32(n) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of the burst's %d connections closed 10 s after its last call, want all", s.closed.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 3 {
		s.calls(t, r, 1)
	}
	if got := s.opened.Load(); got != int32(n+1) {
		t.Errorf("3 calls one after the other after the trim opened %d connections, want 1", got-int32(n))
	}
}

// TestFewConnectionsStay: a provider called now and then, over no more
// than trimFloor connections, keeps them past many quiet periods.
func TestFewConnectionsStay(t *testing.T) {
	s := newPoolServer(t)
	r := trimRegistry(t, s, 20*time.Millisecond)
	s.calls(t, r, trimFloor)
	for range 3 {
		time.Sleep(5 * r.upstreams[0].trim.quiet)
		s.calls(t, r, 1)
	}
	if opened, closed := s.opened.Load(), s.closed.Load(); opened != trimFloor || closed != 0 {
		t.Errorf("%d calls at once, then 3 more with pauses, opened %d connections and closed %d, want %d and 0", trimFloor, opened, closed, trimFloor)
	}
}

// TestTrimWaitsForQuiet: armed by a burst, the trim waits for a period
// without requests, and then disarms until the next burst.
func TestTrimWaitsForQuiet(t *testing.T) {
	var trims int
	tr := &idleTrim{closeIdle: func() { trims++ }, quiet: time.Hour} // the timer never fires: checks are called here
	t.Cleanup(tr.stop)
	for range trimFloor {
		tr.dialed()
	}
	if tr.armed.Load() {
		t.Fatalf("armed after %d dials, want more than %d", trimFloor, trimFloor)
	}
	tr.dialed()
	if !tr.armed.Load() {
		t.Fatalf("not armed after %d dials", trimFloor+1)
	}
	tr.sending()
	tr.check()
	if trims != 0 {
		t.Fatal("trimmed in a period with a request")
	}
	tr.check()
	if trims != 1 || tr.armed.Load() || tr.dials.Load() != 0 {
		t.Fatalf("after a quiet period: %d trims, armed %v, %d dials counted; want 1, false, 0", trims, tr.armed.Load(), tr.dials.Load())
	}
}

// TestTrimTimer: once armed, the trim comes by itself after a quiet
// period.
func TestTrimTimer(t *testing.T) {
	trims := make(chan struct{}, 1)
	tr := &idleTrim{closeIdle: func() { trims <- struct{}{} }, quiet: 10 * time.Millisecond}
	t.Cleanup(tr.stop)
	for range trimFloor + 1 {
		tr.dialed()
	}
	select {
	case <-trims:
	case <-time.After(10 * time.Second):
		t.Fatal("armed, the trim never came")
	}
}
