package webhooks

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/testenv"
	"github.com/switchboard-ai/switchboard/runtime"
)

// PreToolCall posts the call and reads the verdict; its errors say what
// went wrong without the hook's URL, which the model reads.
func TestPreToolCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			var c runtime.HookCall
			b, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(b, &c); err != nil || c.Tool != "issue_refund" || string(c.Arguments) != `{"amount":5}` {
				http.Error(w, "bad body "+string(b), http.StatusBadRequest)
				return
			}
			_, _ = io.WriteString(w, `{"action": "ask", "arguments": {"amount": 4}, "reason": "over limit"}`)
		case "/slow":
			select {
			case <-time.After(time.Second):
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	closed := "http://" + testenv.RefusingAddr(t) + "/secret-path"

	c := New(nil)
	call := &runtime.HookCall{Tool: "issue_refund", Arguments: json.RawMessage(`{"amount":5}`), Metadata: map[string]string{}}
	v, err := c.PreToolCall(context.Background(), &graphs.Hook{URL: srv.URL + "/echo", Timeout: time.Second}, call)
	if err != nil || v.Action != graphs.ActionAsk || string(v.Arguments) != `{"amount":4}` || v.Reason != "over limit" {
		t.Fatalf("verdict %+v, %v", v, err)
	}
	for _, tc := range []struct {
		url, want string
	}{
		{srv.URL + "/slow", "no answer within 100ms"},
		{closed, "unreachable: connection refused"},
		{"http://no-such-host.invalid/secret-path", "unreachable: its host name does not resolve"},
		{srv.URL + "/missing", "not a pre_tool_call answer"}, // 200 with an empty body
	} {
		// Only the slow hook is given a short timeout: the others must fail
		// for their own reason, which a busy machine may take longer to see.
		timeout := 2 * time.Second
		if strings.HasSuffix(tc.url, "/slow") {
			timeout = 100 * time.Millisecond
		}
		_, err := c.PreToolCall(context.Background(), &graphs.Hook{URL: tc.url, Timeout: timeout}, call)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.url, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "secret-path") || strings.Contains(err.Error(), "/slow") ||
			strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "no-such-host")) {
			t.Errorf("the error names the URL: %v", err)
		}
	}
}
