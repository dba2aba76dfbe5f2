package providers

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

// A stream's request is sent without net/http's client, straight through
// the provider's transport (call.openStream); these tests hold it to what
// the client did, and to where it waits.

// TestSchemeMismatch: an https base URL at a server that answers in plain
// HTTP fails as net/http's client says it, streamed or not.
func TestSchemeMismatch(t *testing.T) {
	s := fakeupstream.New(t)
	r := newTestRegistry(t, s, fastOptions(), func(p *graphs.Provider) { p.BaseURL = strings.Replace(s.URL, "http://", "https://", 1) })
	var texts []string
	for _, stream := range []bool{false, true} {
		_, err := r.Chat(t.Context(), userRequest("hi", stream), nil)
		if !errors.Is(err, http.ErrSchemeMismatch) {
			t.Errorf("stream=%v: err = %v, want http.ErrSchemeMismatch", stream, err)
		}
		texts = append(texts, fmt.Sprint(err))
	}
	if texts[0] != texts[1] {
		t.Errorf("a stream failed with %q, a whole answer with %q", texts[1], texts[0])
	}
}

// TestStreamWaitsForItsHeadersOnItsOwnGoroutine: while a stream's request
// waits for the answer's headers, the goroutine waiting in net/http's
// client is the caller's, and none aside (freshstack) waits with it: every
// stream opening at once held one more goroutine and its 8 KB stack when
// the request was sent aside (issue 22).
func TestStreamWaitsForItsHeadersOnItsOwnGoroutine(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	r, err := New(map[string]graphs.Provider{"fake": {Kind: graphs.ProviderOpenAI, BaseURL: srv.URL + "/v1", APIKey: "sk-test", Timeout: 5 * time.Second}}, fastOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	done := make(chan error, 1)
	go func() {
		resp, err := r.Chat(t.Context(), userRequest("hi", true), nil)
		if err == nil && resp.Message.Content != "hi" {
			err = fmt.Errorf("answer %q, want hi", resp.Message.Content)
		}
		done <- err
	}()
	<-arrived
	var waiting string
	for deadline := time.Now().Add(5 * time.Second); waiting == "" && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		buf := make([]byte, 1<<20)
		buf = buf[:goruntime.Stack(buf, true)]
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "net/http.(*persistConn).roundTrip") {
				waiting = g
			}
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	switch {
	case waiting == "":
		t.Fatal("no goroutine waited for the answer in net/http's client")
	case !strings.Contains(waiting, "providers.(*call).openStream(") || strings.Contains(waiting, "freshstack"):
		t.Errorf("the goroutine waiting for the answer's headers is not the caller's:\n%s", waiting)
	}
}

// TestBaseURLUserIsBasicAuthorization: a provider URL with a user and
// password and no key authorizes as net/http's client makes it, streamed
// or not (a stream's request is otherwise sent without the client).
func TestBaseURLUserIsBasicAuthorization(t *testing.T) {
	s := fakeupstream.New(t, fakeupstream.Reply{Text: "ok"}, fakeupstream.Reply{Text: "ok"})
	r := newTestRegistry(t, s, fastOptions(), func(p *graphs.Provider) {
		p.BaseURL = strings.Replace(s.URL, "://", "://ada:s3cret@", 1)
		p.APIKey = ""
	})
	for i, stream := range []bool{false, true} {
		if _, err := r.Chat(t.Context(), userRequest("hi", stream), nil); err != nil {
			t.Fatalf("stream=%v: %v", stream, err)
		}
		if got, want := s.Requests()[i].Header.Get("Authorization"), "Basic YWRhOnMzY3JldA=="; got != want {
			t.Errorf("stream=%v: Authorization %q, want %q", stream, got, want)
		}
	}
}
