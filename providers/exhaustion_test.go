package providers

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/runtime"
)

// TestLocalExhaustionIsRetried: a dial that fails in the gateway itself
// (no file descriptor, no local port) sent nothing, and is retried like a
// refused connection; with retries off, the error says what ran out. (The
// whole path, with the process's own limit, is cmd/switchboard's
// TestServeRetriesADialOutOfFiles.)
func TestLocalExhaustionIsRetried(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no file descriptor in the process", os.NewSyscallError("socket", syscall.EMFILE), "provider fake unreachable (the gateway has too many open files)"},
		{"no file descriptor in the system", os.NewSyscallError("socket", syscall.ENFILE), "provider fake unreachable (the gateway has too many open files)"},
		{"no local port", os.NewSyscallError("connect", syscall.EADDRNOTAVAIL), "provider fake unreachable (the gateway has no free local port)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, stream := range []bool{false, true} {
				s := fakeupstream.New(t, fakeupstream.Reply{Text: "finally"})
				r := newTestRegistry(t, s, fastOptions(), nil)
				failed := failDials(r, 1, tc.err)
				var d deltas
				resp, err := r.Chat(t.Context(), userRequest("hi", stream), d.add)
				if err != nil {
					t.Fatalf("stream %v: %v, want the retry to answer", stream, err)
				}
				if resp.Message.Content != "finally" || failed.Load() != 1 || len(s.Requests()) != 1 {
					t.Errorf("stream %v: content %q after %d failed dials and %d requests, want \"finally\" after 1 and 1",
						stream, resp.Message.Content, failed.Load(), len(s.Requests()))
				}
			}

			s := fakeupstream.New(t, fakeupstream.Reply{Text: "must not be fetched"})
			r := newTestRegistry(t, s, fastOptions(), func(p *graphs.Provider) { p.MaxRetries = ptr(0) })
			failDials(r, 1, tc.err)
			_, err := r.Chat(t.Context(), userRequest("hi", false), nil)
			if !errors.Is(err, runtime.ErrUpstream) || err.Error() != tc.want {
				t.Errorf("err = %v, want ErrUpstream %q", err, tc.want)
			}
			if len(s.Requests()) != 0 {
				t.Errorf("the provider got %d requests through a dial that failed", len(s.Requests()))
			}
		})
	}
}

// TestOtherDialFailuresAreNotRetried: a dial error that will not pass by
// itself (here, permission denied) fails the call at once.
func TestOtherDialFailuresAreNotRetried(t *testing.T) {
	s := fakeupstream.New(t, fakeupstream.Reply{Text: "must not be fetched"})
	r := newTestRegistry(t, s, fastOptions(), nil)
	failed := failDials(r, 1, os.NewSyscallError("connect", syscall.EACCES))
	_, err := r.Chat(t.Context(), userRequest("hi", false), nil)
	if !errors.Is(err, runtime.ErrUpstream) || !strings.Contains(err.Error(), "cannot connect") {
		t.Errorf("err = %v, want ErrUpstream: cannot connect", err)
	}
	if failed.Load() != 1 || len(s.Requests()) != 0 {
		t.Errorf("%d dials failed and the provider got %d requests, want 1 and 0", failed.Load(), len(s.Requests()))
	}
}

// failDials makes the first n dials of r's one upstream fail with err, as
// net.Dialer reports a failed dial; later dials connect. It returns the
// count of dials failed.
func failDials(r *Registry, n int64, err error) *atomic.Int64 {
	var failed atomic.Int64
	tr := r.upstreams[0].transport
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if failed.Add(1) <= n {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		failed.Add(-1)
		return dial(ctx, network, addr)
	}
	return &failed
}

// A provider's connections stop at half the files the process may open,
// so that spare dials never take the files its clients' connections need;
// past that a call waits for a connection to come free (net/http's
// MaxConnsPerHost). No limit, or one past any count of streams, sets none.
func TestProviderConnectionsStopAtHalfTheFileLimit(t *testing.T) {
	for _, tc := range []struct {
		limit uint64
		want  int
	}{
		{20000, 10000},
		{1024, 512},
		{1 << 24, 1 << 23},
		{0, 0},
		{1<<24 + 1, 0},
		{^uint64(0), 0}, // RLIM_INFINITY
	} {
		if got := maxConns(tc.limit); got != tc.want {
			t.Errorf("maxConns(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
	limit := openFileLimit()
	if limit == 0 {
		t.Skip("no open-file limit to read here")
	}
	if got, want := newTransport(time.Second).MaxConnsPerHost, maxConns(limit); got != want || want == 0 && limit <= 1<<24 {
		t.Errorf("a provider's transport allows %d connections under a limit of %d files, want %d", got, limit, want)
	}
}
