package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// start serves a fresh upstream for the test.
func start(t *testing.T) (string, *http.Client) {
	t.Helper()
	u := newUpstream()
	srv := httptest.NewServer(u)
	tr := &http.Transport{}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		u.Close()
		srv.Close()
	})
	return srv.URL, &http.Client{Transport: tr}
}

func post(t *testing.T, c *http.Client, url, body string) (int, string) {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type recorded struct {
	Path     string          `json:"path"`
	Body     json.RawMessage `json:"body"`
	Canceled bool            `json:"canceled"`
}

func requests(t *testing.T, c *http.Client, base string) []recorded {
	t.Helper()
	resp, err := c.Get(base + "/_control/requests")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []recorded
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestScriptedRepliesThroughTheProxy(t *testing.T) {
	base, c := start(t)
	status, body := post(t, c, base+"/_control/script", `[
		{"tool_calls":[{"id":"c1","name":"escalate_refund","arguments":{"orderId":"A1"}},{"id":"c2","name":"broken","arguments":"{\"x\":"}]},
		{"text":"hello","usage":{"prompt_tokens":3,"completion_tokens":4}}
	]`)
	if status != http.StatusOK || body != `{"added":2}` {
		t.Fatalf("script: %d %s", status, body)
	}

	status, body = post(t, c, base+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if status != http.StatusOK {
		t.Fatalf("first: %d %s", status, body)
	}
	var first struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(body), &first); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tc := range first.Choices[0].Message.ToolCalls {
		got = append(got, tc.ID+" "+tc.Function.Name+" "+tc.Function.Arguments)
	}
	want := []string{`c1 escalate_refund {"orderId":"A1"}`, `c2 broken {"x":`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}

	// The second reply, streamed: chunks arrive through the proxy in SSE form.
	resp, err := c.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"again"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var usage string
	sc := bufio.NewScanner(resp.Body)
	var last string
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		last = d
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage json.RawMessage `json:"usage"`
		}
		if d == "[DONE]" || json.Unmarshal([]byte(d), &chunk) != nil {
			continue
		}
		for _, ch := range chunk.Choices {
			text.WriteString(ch.Delta.Content)
		}
		if len(chunk.Usage) > 0 && string(chunk.Usage) != "null" {
			usage = string(chunk.Usage)
		}
	}
	resp.Body.Close()
	if text.String() != "hello" || last != "[DONE]" || usage != `{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}` {
		t.Errorf("stream: text %q last %q usage %s", text.String(), last, usage)
	}

	reqs := requests(t, c, base)
	if len(reqs) != 2 || reqs[0].Path != "/v1/chat/completions" || reqs[0].Canceled || reqs[1].Canceled {
		t.Fatalf("recorded %+v", reqs)
	}
	var b struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(reqs[1].Body, &b); err != nil || b.Messages[0].Content != "again" {
		t.Errorf("recorded body %s (%v)", reqs[1].Body, err)
	}

	// Script exhausted: the fake's own 500.
	if status, body := post(t, c, base+"/v1/chat/completions", `{"model":"m","messages":[]}`); status != 500 || !strings.Contains(body, "script exhausted") {
		t.Errorf("exhausted: %d %s", status, body)
	}
}

func TestHangIsRecordedAsCanceled(t *testing.T) {
	base, c := start(t)
	post(t, c, base+"/_control/script", `[{"hang":true}]`)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[]}`))
	if _, err := c.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hanging reply answered: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		reqs := requests(t, c, base)
		if len(reqs) == 1 && reqs[0].Canceled {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("request not recorded as canceled: %+v", reqs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestReset(t *testing.T) {
	base, c := start(t)
	post(t, c, base+"/_control/script", `[{"text":"a"},{"text":"b"}]`)
	post(t, c, base+"/v1/chat/completions", `{"model":"m","messages":[]}`)
	if status, body := post(t, c, base+"/_control/reset", ``); status != http.StatusOK {
		t.Fatalf("reset: %d %s", status, body)
	}
	if reqs := requests(t, c, base); len(reqs) != 0 {
		t.Errorf("requests after reset: %+v", reqs)
	}
	// The unused reply "b" is gone too.
	if status, body := post(t, c, base+"/v1/chat/completions", `{"model":"m","messages":[]}`); status != 500 || !strings.Contains(body, "script exhausted") {
		t.Errorf("after reset: %d %s", status, body)
	}
}

func TestBadScripts(t *testing.T) {
	base, c := start(t)
	tests := []struct {
		name, body, want string
	}{
		{"not an array", `{"text":"x"}`, "JSON array"},
		{"unknown field", `[{"txet":"x"}]`, "txet"},
		{"tool call without a name", `[{"tool_calls":[{"id":"c1"}]}]`, "reply 0: tool_calls[0]: id and name are required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(t, c, base+"/_control/script", tt.body)
			if status != http.StatusBadRequest || !strings.Contains(body, tt.want) {
				t.Errorf("%d %s, want 400 with %q", status, body, tt.want)
			}
		})
	}
}

// The command writes its address and stops on SIGTERM.
func TestRunWritesAddrFile(t *testing.T) {
	addrFile := filepath.Join(t.TempDir(), "addr")
	done := make(chan int, 1)
	go func() { done <- run([]string{"--listen", "127.0.0.1:0", "--addr-file", addrFile}, io.Discard) }()
	var addr string
	deadline := time.Now().Add(5 * time.Second)
	for addr == "" {
		if b, err := os.ReadFile(addrFile); err == nil {
			addr = strings.TrimSpace(string(b))
		} else if time.Now().After(deadline) {
			t.Fatal("addr file never written")
		}
		time.Sleep(5 * time.Millisecond)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + addr + "/_control/requests")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("requests: %d %s", resp.StatusCode, b)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit code %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not stop on SIGTERM")
	}
}
