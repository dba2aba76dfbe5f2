package upstream_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

// An agent's fallback model answers when its first model fails before any
// text reached the client, and the reply shows no sign of the failure.
func TestFallbackModel(t *testing.T) {
	tests := []struct {
		name            string
		timeout         string // provider fake's
		primary         []fakeupstream.Reply
		wantPrimaryReqs int
	}{
		{name: "primary 500s after its retries", primary: []fakeupstream.Reply{{Status: 500}, {Status: 500}, {Status: 500}}, wantPrimaryReqs: 3},
		{name: "primary refuses the request", primary: []fakeupstream.Reply{{Status: 400, Text: "model does not support tools"}}, wantPrimaryReqs: 1},
		{name: "primary times out", timeout: "300ms", primary: []fakeupstream.Reply{{Delay: 2 * time.Second}}, wantPrimaryReqs: 1},
	}
	for _, tc := range tests {
		for _, stream := range []bool{false, true} {
			name := tc.name
			if stream {
				name += "/streamed"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				r := start(t, setup{timeout: tc.timeout})
				r.fake.Push(tc.primary...)
				r.fake.Push(fakeupstream.Reply{Text: "primary must not be asked again"})
				r.fake2.Push(fakeupstream.Reply{StreamChunks: []string{"Backup ", "here."}, Text: "Backup here."})
				resp := r.gw.Chat(chatBody("fallback", "hello", stream), nil)
				if got := replyText(t, resp, stream); got != "Backup here." {
					t.Errorf("reply %q, want the backup's answer", got)
				}
				if strings.Contains(string(resp.Body), `"error"`) {
					t.Errorf("the reply mentions an error: %s", resp.Body)
				}
				if got := resp.Header.Get("X-Agent-Name"); got != "relay" {
					t.Errorf("X-Agent-Name %q, want relay", got)
				}
				primary, backup := r.fake.Requests(), r.fake2.Requests()
				if len(primary) != tc.wantPrimaryReqs || len(backup) != 1 {
					t.Fatalf("requests: primary %d, backup %d; want %d and 1", len(primary), len(backup), tc.wantPrimaryReqs)
				}
				if primary[0].Parsed.Model != "primary" || backup[0].Parsed.Model != "backup" {
					t.Errorf("models asked: %q then %q", primary[0].Parsed.Model, backup[0].Parsed.Model)
				}
				// The backup gets the very prompt the primary got: nothing
				// of the failure leaks into the conversation.
				if diff := cmp.Diff(primary[0].Parsed.Messages, backup[0].Parsed.Messages); diff != "" {
					t.Errorf("backup prompt differs from the primary's (-primary +backup):\n%s", diff)
				}
			})
		}
	}
}

// Once the primary has streamed text to the client, a failure is the
// client's to see: the backup is not asked, since its answer would follow
// half of another one.
func TestNoFallbackAfterStreamedText(t *testing.T) {
	t.Parallel()
	r := start(t, setup{})
	r.fake.Push(fakeupstream.Reply{StreamChunks: []string{"The answer is "}, Abort: true})
	r.fake2.Push(fakeupstream.Reply{Text: "Backup here."})
	s := readStream(t, r.gw.Chat(chatBody("fallback", "hello", true), nil))
	if s.text != "The answer is " {
		t.Errorf("streamed text %q", s.text)
	}
	if e := s.errorEvent(t); e == nil || e.Error.Code != "upstream_error" {
		t.Errorf("error event %+v, want upstream_error", e)
	}
	if n, m := len(r.fake.Requests()), len(r.fake2.Requests()); n != 1 || m != 0 {
		t.Errorf("requests: primary %d, backup %d; want 1 and 0", n, m)
	}
}

// When every model of the agent fails, the client gets the last failure.
func TestAllModelsFail(t *testing.T) {
	t.Parallel()
	r := start(t, setup{})
	r.fake.Push(fakeupstream.Reply{Status: 400, Text: "primary says no"})
	r.fake2.Push(fakeupstream.Reply{Status: 401, Text: "backup says no"})
	resp := r.gw.Chat(chatBody("fallback", "hello", false), nil)
	wantError(t, resp, http.StatusBadGateway, "upstream_error")
	if !strings.Contains(string(resp.Body), "backup says no") {
		t.Errorf("error should report the last model's failure: %s", resp.Body)
	}
	if n, m := len(r.fake.Requests()), len(r.fake2.Requests()); n != 1 || m != 1 {
		t.Errorf("requests: primary %d, backup %d; want 1 and 1", n, m)
	}
}
