package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// streamChunk is what tests read of a chat.completion.chunk.
type streamChunk struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`
	Metadata map[string]string `json:"metadata"`
	Error    *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// readStream decodes an SSE body; it fails unless it ends with exactly one
// [DONE].
func readStream(t *testing.T, r *gwtest.Response) []streamChunk {
	t.Helper()
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d type %q: %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	data := gwtest.SSE(t, r.Body)
	if len(data) == 0 || data[len(data)-1] != "[DONE]" || strings.Count(string(r.Body), "[DONE]") != 1 {
		t.Fatalf("stream does not end with one [DONE]:\n%s", r.Body)
	}
	out := make([]streamChunk, 0, len(data)-1)
	for _, d := range data[:len(data)-1] {
		var c streamChunk
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		out = append(out, c)
	}
	return out
}

func streamBody(text string) map[string]any {
	b := gwtest.User("support", text)
	b["stream"] = true
	b["stream_options"] = map[string]any{"include_usage": true}
	return b
}

func TestStreamedHandoff(t *testing.T) {
	gw, fake, _ := desk(t,
		fakeupstream.Reply{ToolCalls: []fakeupstream.ToolCall{toolCall("call_h", "transfer_to_billing", `{"reason":"charge"}`)}},
		fakeupstream.Reply{StreamChunks: []string{"Hello ", "from ", "billing."}},
	)
	r := gw.Chat(streamBody("I was charged twice"), nil)
	if got := r.Header.Get("X-Agent-Name"); got != "triage" {
		t.Errorf("X-Agent-Name on a stream %q, want the starting agent triage", got)
	}
	chunks := readStream(t, r)
	var text strings.Builder
	var handoffs []map[string]string
	lastAgent := ""
	for i, c := range chunks {
		if c.Object != "chat.completion.chunk" || c.Model != "support" {
			t.Errorf("chunk %d: object %q model %q", i, c.Object, c.Model)
		}
		if c.Metadata["agentName"] == "" {
			t.Errorf("chunk %d has no metadata.agentName", i)
		}
		if c.Metadata["event"] == "handoff" {
			handoffs = append(handoffs, c.Metadata)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				text.WriteString(*ch.Delta.Content)
				lastAgent = c.Metadata["agentName"]
			}
		}
	}
	if text.String() != "Hello from billing." || lastAgent != "billing" {
		t.Errorf("text %q from %q", text.String(), lastAgent)
	}
	want := []map[string]string{{"agentName": "billing", "event": "handoff", "from": "triage", "to": "billing", "toolCallId": "call_h"}}
	if diff := cmp.Diff(want, handoffs); diff != "" {
		t.Errorf("handoff chunks (-want +got):\n%s", diff)
	}
	last := chunks[len(chunks)-1]
	if last.Usage == nil || last.Usage.TotalTokens != 30 || len(last.Choices) != 0 {
		t.Errorf("last chunk should be the summed usage: %+v", last)
	}
	finish := chunks[len(chunks)-2]
	if len(finish.Choices) != 1 || finish.Choices[0].FinishReason == nil || *finish.Choices[0].FinishReason != "stop" {
		t.Errorf("finish chunk: %+v", finish)
	}
	for _, req := range fake.Requests() {
		if !req.Parsed.Stream || req.Parsed.StreamOptions == nil || !req.Parsed.StreamOptions.IncludeUsage {
			t.Errorf("provider call not streamed with usage: %s", req.Body)
		}
	}
}

// A stream's fixed headers, set from slices every stream shares, are the
// same on every stream.
func TestStreamHeaders(t *testing.T) {
	gw, _, _ := desk(t, fakeupstream.Reply{StreamChunks: []string{"a"}}, fakeupstream.Reply{StreamChunks: []string{"b"}})
	want := map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
	for i := range 2 {
		r := gw.Chat(streamBody("hi"), nil)
		readStream(t, r)
		for k, v := range want {
			if got := r.Header.Values(k); len(got) != 1 || got[0] != v {
				t.Errorf("stream %d: %s %q, want %q", i, k, got, v)
			}
		}
	}
}

// Text reaches the client while the provider is still producing it.
func TestStreamForwardsDeltasAsTheyCome(t *testing.T) {
	gw, _, _ := desk(t, fakeupstream.Reply{StreamChunks: []string{"first", " second"}, ChunkDelay: 2 * time.Second})
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(`{"model":"support","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"first"`) {
			break
		}
	}
	if waited := time.Since(start); waited > 1500*time.Millisecond {
		t.Errorf("first delta arrived after %v: the turn was buffered", waited)
	}
}

func TestStreamErrorAfterStart(t *testing.T) {
	gw, _, _ := desk(t,
		fakeupstream.Reply{StreamChunks: []string{"Let me check. "}, ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}},
		fakeupstream.Reply{Status: 500, Text: "billing model down"},
		fakeupstream.Reply{Status: 500, Text: "billing model down"},
		fakeupstream.Reply{Status: 500, Text: "billing model down"},
	)
	chunks := readStream(t, gw.Chat(streamBody("x"), nil))
	last := chunks[len(chunks)-1]
	if last.Error == nil || last.Error.Code != "upstream_error" {
		t.Errorf("last event before [DONE] should be the error: %+v", last)
	}
}

func TestStreamErrorBeforeStartIsAnHTTPStatus(t *testing.T) {
	gw, _, _ := desk(t)
	r := gw.Chat(map[string]any{"model": "nope", "stream": true, "messages": []map[string]any{{"role": "user", "content": "x"}}}, nil)
	if r.Status != http.StatusNotFound || r.ErrorCode(t) != "model_not_found" {
		t.Errorf("%d %s", r.Status, r.Body)
	}
}

// A client that disconnects mid-run cancels the provider call at once and
// leaves the session free and unchanged.
func TestClientDisconnectCancelsTheRun(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		for _, stream := range []bool{true, false} {
			gw, fake := sessionDesk(t, storeURL, fakeupstream.Reply{Hang: true}, fakeupstream.Reply{Text: "after"})
			id := newSessionID(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				b := gwtest.User("support", "hang")
				b["stream"] = stream
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(mustJSON(b)))
				req.Header.Set("X-Session-Id", id)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
			reqs, err := fake.WaitRequests(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			select {
			case <-reqs[0].Canceled:
			case <-time.After(5 * time.Second):
				t.Fatal("the provider call was not cancelled")
			}
			<-done
			// The next turn, sent at once, is served: it waits the moment
			// the aborted run needs to release the session.
			r := gw.Chat(gwtest.User("support", "again"), session(id))
			if r.Status != http.StatusOK {
				t.Fatalf("session after disconnect: %d %s", r.Status, r.Body)
			}
			_, s := getSession(t, gw, id, nil)
			if len(s.Transcript) != 2 {
				t.Errorf("the cancelled turn left %d messages, want only the next turn's 2", len(s.Transcript))
			}
		}
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// A provider's refusal is the answer's text, streamed or not: a stream's
// refusal deltas reach the client as content, and the session keeps the
// refusal as the assistant's message, as it does for an answer in one
// piece (README, Choices).
func TestRefusalIsTheText(t *testing.T) {
	const refusal = "I can't help with that request."
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "streamed"}[stream], func(t *testing.T) {
			gw, _ := sessionDesk(t, "memory://",
				fakeupstream.Reply{Refusal: refusal, StreamChunks: []string{"I can't ", "help with ", "that request."}},
			)
			id := newSessionID(t)
			body := gwtest.User("support", "something forbidden")
			body["stream"] = stream
			r := gw.Chat(body, map[string]string{"X-Session-Id": id})
			var text string
			if stream {
				var b strings.Builder
				for _, c := range readStream(t, r) {
					for _, ch := range c.Choices {
						if ch.Delta.Content != nil {
							b.WriteString(*ch.Delta.Content)
						}
					}
				}
				text = b.String()
			} else {
				var c gwtest.Completion
				r.Decode(t, &c)
				text = c.Text()
			}
			if text != refusal {
				t.Errorf("the client got %q, want the refusal %q", text, refusal)
			}
			var s struct {
				Transcript []struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"transcript"`
			}
			gw.Do(context.Background(), http.MethodGet, "/v1/sessions/"+id, nil, map[string]string{"X-Session-Id": id}).Decode(t, &s)
			if n := len(s.Transcript); n == 0 || s.Transcript[n-1].Role != "assistant" || s.Transcript[n-1].Content != refusal {
				t.Errorf("the session keeps %+v", s.Transcript)
			}
		})
	}
}

// The providers' usage details (cached prompt tokens, reasoning tokens)
// reach the client summed over the run's model calls, as the counts do:
// in a reply, a stream's usage chunk and a response's usage.
func TestUsageDetails(t *testing.T) {
	usage := &fakeupstream.Usage{PromptTokens: 10, CompletionTokens: 5,
		PromptTokensDetails:     &fakeupstream.PromptTokensDetails{CachedTokens: 6},
		CompletionTokensDetails: &fakeupstream.CompletionTokensDetails{ReasoningTokens: 3}}
	run := func() []fakeupstream.Reply {
		return []fakeupstream.Reply{
			{ToolCalls: []fakeupstream.ToolCall{toolCall("c1", "transfer_to_billing", `{}`)}, Usage: usage},
			{Text: "Billing here.", Usage: usage},
		}
	}
	gw, fake := sessionDesk(t, "memory://")
	const want = `"prompt_tokens":20,"completion_tokens":10,"total_tokens":30,"prompt_tokens_details":{"cached_tokens":12},"completion_tokens_details":{"reasoning_tokens":6}}`

	fake.Push(run()...)
	if r := gw.Chat(gwtest.User("support", "charged twice"), nil); !strings.Contains(string(r.Body), want) {
		t.Errorf("reply: %s", r.Body)
	}
	fake.Push(run()...)
	body := gwtest.User("support", "charged twice")
	body["stream"] = true
	body["stream_options"] = map[string]any{"include_usage": true}
	if r := gw.Chat(body, nil); !strings.Contains(string(r.Body), want) {
		t.Errorf("stream: %s", r.Body)
	}
	fake.Push(run()...)
	r := gw.Do(context.Background(), http.MethodPost, "/v1/responses", map[string]any{"model": "support", "input": "charged twice"}, nil)
	if !strings.Contains(string(r.Body), `"input_tokens_details":{"cached_tokens":12,`) || !strings.Contains(string(r.Body), `"output_tokens_details":{"reasoning_tokens":6}`) {
		t.Errorf("response: %s", r.Body)
	}
}
