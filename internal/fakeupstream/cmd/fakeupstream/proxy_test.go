package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

// The e2e suite once failed with a stream cut short by this proxy
// ("httputil: ReverseProxy read error during body copy: ... use of closed
// network connection"). An HTTP/1.x server that starts a response before
// the handler has finished with the request body discards what is left of
// the body and closes it. The proxy's transport reads that body in its own
// goroutine: once it has sent the last byte upstream it reads once more to
// see EOF. If the upstream's answer is already back and its headers have
// been flushed by then, that read fails (http: invalid Read on closed
// Body), the transport closes the upstream connection, and the stream
// being copied from it breaks. It takes that goroutine being descheduled
// at the wrong moment: a loaded machine, or many streams at once.

// streamBody is a request body of about the gateway's size, sent with a
// Content-Length as the gateway sends it.
var streamBody = `{"model":"m","stream":true,"messages":[{"role":"system","content":"` +
	strings.Repeat("You are a helpful desk. ", 60) + `"},{"role":"user","content":"hi"}]}`

// slowStreams answers every request with a stream of a few spaced chunks.
func slowStreams(u *upstream, chunkDelay time.Duration) {
	u.current().SetFallback(func(fakeupstream.Request) fakeupstream.Reply {
		return fakeupstream.Reply{StreamChunks: []string{"a", "b", "c", "d"}, ChunkDelay: chunkDelay}
	})
}

// readStream reads a streamed reply and says what was wrong with it, or "".
func readStream(resp *http.Response) string {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("status %d: %s", resp.StatusCode, b)
	}
	var last string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			last = d
		}
	}
	if last != "[DONE]" {
		return fmt.Sprintf("stream cut: last event %q, read error %v", last, sc.Err())
	}
	return ""
}

// bodyHeldAtEOF is the proxy's transport with the reproduction's one
// change: each request body's final read (the one that finds EOF) waits
// until the test's client holds the response headers. That is the
// scheduling a loaded machine produces by chance, made certain.
type bodyHeldAtEOF struct {
	base    http.RoundTripper
	headers <-chan struct{}
}

func (t bodyHeldAtEOF) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body = &heldEOF{ReadCloser: r.Body, headers: t.headers}
	}
	return t.base.RoundTrip(r)
}

type heldEOF struct {
	io.ReadCloser
	headers <-chan struct{}
	sawEOF  bool
}

// Read passes data on without its EOF; the read after it waits for the
// headers, then reads the body again (EOF, or an error once it is closed).
func (h *heldEOF) Read(p []byte) (int, error) {
	if h.sawEOF {
		<-h.headers
		return h.ReadCloser.Read(p)
	}
	n, err := h.ReadCloser.Read(p)
	if err == io.EOF {
		h.sawEOF = true
		if n > 0 {
			err = nil
		}
	}
	return n, err
}

// A stream whose request body is still being read by the proxy's
// transport when the response starts reaches its end.
func TestProxyLeavesRequestBodyToTransport(t *testing.T) {
	u := newUpstream()
	headers := make(chan struct{})
	u.proxy.Transport = bodyHeldAtEOF{base: http.DefaultTransport.(*http.Transport).Clone(), headers: headers}
	srv := httptest.NewServer(u)
	tr := &http.Transport{}
	defer func() {
		tr.CloseIdleConnections()
		u.Close()
		srv.Close()
	}()
	slowStreams(u, 20*time.Millisecond)

	resp, err := (&http.Client{Transport: tr}).Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(streamBody))
	close(headers)
	if err != nil {
		t.Fatal(err)
	}
	if problem := readStream(resp); problem != "" {
		t.Fatal(problem)
	}
}

// Many slow streams at once through the proxy, on a loaded machine, all
// reach their end. CI runs a few hundred; by hand, PROXY_ROUNDS=20
// PROXY_STREAMS=2000 cut 20 of 40,000 streams before the proxy enabled full
// duplex, and none after. TestProxyLeavesRequestBodyToTransport is the
// certain form of the same failure.
func TestProxyManyConcurrentStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("many streams")
	}
	rounds, streams := envInt("PROXY_ROUNDS", 1), envInt("PROXY_STREAMS", 400)
	u := newUpstream()
	srv := httptest.NewServer(u)
	tr := &http.Transport{MaxIdleConnsPerHost: streams}
	defer func() {
		tr.CloseIdleConnections()
		u.Close()
		srv.Close()
	}()
	slowStreams(u, 5*time.Millisecond)
	defer contend(envInt("PROXY_PROCS", 8), envInt("PROXY_SPIN", 1))()
	c := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var failed int
	for range rounds {
		problems := make(chan string, streams)
		var wg sync.WaitGroup
		for range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(streamBody))
				resp, err := c.Do(req)
				if err != nil {
					problems <- err.Error()
					return
				}
				if p := readStream(resp); p != "" {
					problems <- p
				}
			}()
		}
		wg.Wait()
		close(problems)
		for p := range problems {
			if failed++; failed <= 3 {
				t.Error(p)
			}
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d streams failed", failed, rounds*streams)
	}
}

func envInt(k string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(k), &n); err == nil {
		return n
	}
	return def
}

// contend makes the machine a loaded one: more Ps than cores, so that the
// OS time-slices the process's threads, and spinning goroutines that keep
// them all busy. The returned func ends it.
func contend(procs, spinners int) func() {
	old := goruntime.GOMAXPROCS(procs * goruntime.NumCPU())
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range spinners * goruntime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				for i := 0; i < 1e5; i++ {
				}
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
		goruntime.GOMAXPROCS(old)
	}
}
