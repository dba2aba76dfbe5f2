package fakeupstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	openai "github.com/sashabaranov/go-openai"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// client returns a go-openai client for s whose idle connections close when
// the test ends.
func client(t *testing.T, s *Server) *openai.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := openai.DefaultConfig("test-key")
	cfg.BaseURL = s.URL
	cfg.HTTPClient = &http.Client{Transport: tr}
	return openai.NewClientWithConfig(cfg)
}

func userReq(text string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: text}},
	}
}

func TestNonStreamedText(t *testing.T) {
	s := New(t, Reply{Text: "hello there"})
	resp, err := client(t, s).CreateChatCompletion(t.Context(), userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	got := []any{resp.Object, resp.Model, resp.Choices[0].Message.Role, resp.Choices[0].Message.Content,
		string(resp.Choices[0].FinishReason), resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.TotalTokens}
	want := []any{"chat.completion", "gpt-test", "assistant", "hello there", "stop", 10, 5, 15}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/chat/completions" || r.Parsed.Model != "gpt-test" || r.Parsed.Messages[0].Text() != "hi" {
		t.Errorf("recorded %s %+v", r.Path, r.Parsed)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer test-key" {
		t.Errorf("Authorization = %q", got)
	}
}

func TestNonStreamedToolCalls(t *testing.T) {
	calls := []ToolCall{{ID: "call_1", Name: "lookup", Arguments: `{"q":"x"}`}}
	s := New(t, Reply{ToolCalls: calls, Usage: &Usage{PromptTokens: 7, CompletionTokens: 3}})
	resp, err := http.Post(s.URL+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`"content":null`,
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}}]`,
		`"finish_reason":"tool_calls"`,
		`"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("body lacks %s:\n%s", want, body)
		}
	}
	http.DefaultClient.CloseIdleConnections()
}

// readSSE returns the data payloads of an SSE body.
func readSSE(t *testing.T, r io.Reader) []string {
	t.Helper()
	var data []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	return data
}

func TestStreamedWireShape(t *testing.T) {
	s := New(t, Reply{Text: "abcdef", Usage: &Usage{PromptTokens: 2, CompletionTokens: 3}})
	resp, err := http.Post(s.URL+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	data := readSSE(t, resp.Body)
	want := []string{
		`{"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],"created":C,"id":"chatcmpl-fake-1","model":"m","object":"chat.completion.chunk","usage":null}`,
		`{"choices":[{"delta":{"content":"ab"},"finish_reason":null,"index":0,"logprobs":null}],"created":C,"id":"chatcmpl-fake-1","model":"m","object":"chat.completion.chunk","usage":null}`,
		`{"choices":[{"delta":{"content":"cd"},"finish_reason":null,"index":0,"logprobs":null}],"created":C,"id":"chatcmpl-fake-1","model":"m","object":"chat.completion.chunk","usage":null}`,
		`{"choices":[{"delta":{"content":"ef"},"finish_reason":null,"index":0,"logprobs":null}],"created":C,"id":"chatcmpl-fake-1","model":"m","object":"chat.completion.chunk","usage":null}`,
		`{"choices":[{"delta":{},"finish_reason":"stop","index":0,"logprobs":null}],"created":C,"id":"chatcmpl-fake-1","model":"m","object":"chat.completion.chunk","usage":null}`,
		`{"choices":[],"created":C,"id":"chatcmpl-fake-1","model":"m","object":"chat.completion.chunk","usage":{"prompt_tokens":2,"completion_tokens":3,"total_tokens":5}}`,
		`[DONE]`,
	}
	for i := range data {
		if j := strings.Index(data[i], `"created":`); j >= 0 {
			k := j + strings.IndexByte(data[i][j:], ',')
			data[i] = data[i][:j] + `"created":C` + data[i][k:]
		}
	}
	if diff := cmp.Diff(want, data); diff != "" {
		t.Errorf("SSE data (-want +got):\n%s", diff)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestStreamedWithGoOpenAI(t *testing.T) {
	tests := []struct {
		name      string
		reply     Reply
		wantText  []string
		wantCalls []openai.ToolCall
		wantEnd   string
	}{
		{
			name:     "text in custom chunks",
			reply:    Reply{StreamChunks: []string{"Hel", "lo", "!"}},
			wantText: []string{"Hel", "lo", "!"},
			wantEnd:  "stop",
		},
		{
			name: "tool calls split by index",
			reply: Reply{ToolCalls: []ToolCall{
				{ID: "a", Name: "one", Arguments: `{"x":1}`},
				{ID: "b", Name: "two", Arguments: `{}`},
			}},
			wantCalls: []openai.ToolCall{
				{ID: "a", Type: "function", Function: openai.FunctionCall{Name: "one", Arguments: `{"x":1}`}},
				{ID: "b", Type: "function", Function: openai.FunctionCall{Name: "two", Arguments: `{}`}},
			},
			wantEnd: "tool_calls",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(t, tc.reply)
			req := userReq("hi")
			req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
			st, err := client(t, s).CreateChatCompletionStream(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var text []string
			var calls []openai.ToolCall
			var finish string
			var usage *openai.Usage
			for {
				chunk, err := st.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if chunk.Usage != nil {
					usage = chunk.Usage
				}
				for _, c := range chunk.Choices {
					if c.Delta.Content != "" {
						text = append(text, c.Delta.Content)
					}
					for _, d := range c.Delta.ToolCalls {
						if d.ID != "" {
							calls = append(calls, openai.ToolCall{ID: d.ID, Type: d.Type, Function: d.Function})
							continue
						}
						calls[*d.Index].Function.Arguments += d.Function.Arguments
					}
					if c.FinishReason != "" {
						finish = string(c.FinishReason)
					}
				}
			}
			if diff := cmp.Diff(tc.wantText, text); diff != "" {
				t.Errorf("deltas (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCalls, calls); diff != "" {
				t.Errorf("tool calls (-want +got):\n%s", diff)
			}
			if finish != tc.wantEnd || usage == nil || usage.TotalTokens != 15 {
				t.Errorf("finish %q usage %+v", finish, usage)
			}
		})
	}
}

func TestErrorReplies(t *testing.T) {
	tests := []struct {
		name        string
		script      []Reply
		wantStatus  int
		wantMessage string
	}{
		{"rate limited", []Reply{{Status: 429, RetryAfter: "3", Text: "slow down"}}, 429, "slow down"},
		{"default message", []Reply{{Status: 503}}, 503, "Service Unavailable"},
		{"script exhausted", nil, 500, "fakeupstream: script exhausted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(t, tc.script...)
			_, err := client(t, s).CreateChatCompletion(t.Context(), userReq("hi"))
			var apiErr *openai.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v, want *openai.APIError", err)
			}
			if apiErr.HTTPStatusCode != tc.wantStatus || apiErr.Message != tc.wantMessage {
				t.Errorf("got %d %q, want %d %q", apiErr.HTTPStatusCode, apiErr.Message, tc.wantStatus, tc.wantMessage)
			}
		})
	}
}

func TestRetryAfterHeader(t *testing.T) {
	s := New(t, Reply{Status: 429, RetryAfter: "3"})
	resp, err := http.Post(s.URL+"/chat/completions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" {
		t.Errorf("got %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestBrokenReplies(t *testing.T) {
	tests := []struct {
		name    string
		reply   Reply
		stream  bool
		wantErr string
	}{
		{"abort non-streamed", Reply{Text: "a long enough answer", Abort: true}, false, "unexpected EOF"},
		{"abort stream", Reply{Text: "partial", Abort: true}, true, "unexpected EOF"},
		{"stream error event", Reply{Text: "partial", StreamError: "model overloaded"}, true, "model overloaded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(t, tc.reply)
			c := client(t, s)
			var err error
			if !tc.stream {
				_, err = c.CreateChatCompletion(t.Context(), userReq("hi"))
			} else {
				st, serr := c.CreateChatCompletionStream(t.Context(), userReq("hi"))
				if serr != nil {
					t.Fatal(serr)
				}
				defer st.Close()
				for err == nil {
					_, err = st.Recv()
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestHangRecordsCancel(t *testing.T) {
	s := New(t, Reply{Hang: true})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := client(t, s).CreateChatCompletion(ctx, userReq("hi"))
		done <- err
	}()
	wctx, wcancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer wcancel()
	reqs, err := s.WaitRequests(wctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-reqs[0].Canceled:
		t.Fatal("Canceled closed before the client went away")
	default:
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("client err = %v", err)
	}
	select {
	case <-reqs[0].Canceled:
	case <-wctx.Done():
		t.Fatal("the server never saw the cancellation")
	}
}

func TestDeliveredReplyIsNotCanceled(t *testing.T) {
	s := New(t, Reply{Text: "ok"})
	if _, err := client(t, s).CreateChatCompletion(t.Context(), userReq("hi")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	select {
	case <-s.Requests()[0].Canceled:
		t.Error("Canceled closed for a reply that was delivered")
	default:
	}
}

func TestCloseReleasesHang(t *testing.T) {
	s := New(t, Reply{Hang: true})
	done := make(chan error, 1)
	go func() {
		_, err := client(t, s).CreateChatCompletion(context.Background(), userReq("hi"))
		done <- err
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := s.WaitRequests(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.Close() // must return although the reply hangs
	if err := <-done; err == nil {
		t.Error("the client got an answer from a hanging reply")
	}
}

func TestScriptOrderFuncAndFallback(t *testing.T) {
	s := New(t, Reply{Text: "first"}, Reply{Func: Echo})
	s.Push(Reply{Func: func(r Request) Reply { return Reply{Text: fmt.Sprint(len(r.Parsed.Messages))} }})
	c := client(t, s)
	var got []string
	for _, text := range []string{"a", "b", "c"} {
		resp, err := c.CreateChatCompletion(t.Context(), userReq(text))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.Choices[0].Message.Content)
	}
	if diff := cmp.Diff([]string{"first", "b", "1"}, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}

	// The fallback serves any number of concurrent requests once the script is empty.
	s.SetFallback(Echo)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			want := fmt.Sprintf("msg %d", i)
			resp, err := c.CreateChatCompletion(t.Context(), userReq(want))
			switch {
			case err != nil:
				errs <- err
			case resp.Choices[0].Message.Content != want:
				errs <- fmt.Errorf("got %q, want %q", resp.Choices[0].Message.Content, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(s.Requests()); n != 23 {
		t.Errorf("recorded %d requests, want 23", n)
	}
	s.SetFallback(nil)
	if _, err := c.CreateChatCompletion(t.Context(), userReq("x")); err == nil {
		t.Error("no error once the fallback is removed")
	}
}

func TestParsedRequest(t *testing.T) {
	s := New(t, Reply{})
	body := `{"model":"m","temperature":0,"max_tokens":9,"parallel_tool_calls":false,
		"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"r"},
		{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"b"}]}],
		"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}]}`
	resp, err := http.Post(s.URL+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	p := s.Requests()[0].Parsed
	zero, nine, no := 0.0, 9, false
	checks := []struct {
		name      string
		got, want any
	}{
		{"temperature", p.Temperature, &zero},
		{"max_tokens", p.MaxTokens, &nine},
		{"parallel_tool_calls", p.ParallelToolCalls, &no},
		{"top_p absent", p.TopP, (*float64)(nil)},
		{"tool call", p.Messages[0].ToolCalls, []ToolCall{{ID: "c1", Name: "f", Arguments: "{}"}}},
		{"assistant content", p.Messages[0].Content, nil},
		{"tool result", []string{p.Messages[1].ToolCallID, p.Messages[1].Text()}, []string{"c1", "r"}},
		{"parts text", p.Messages[2].Text(), "ab"},
		{"tool", p.Tools[0].Function.Name + " " + p.Tools[0].Function.Description + " " + string(p.Tools[0].Function.Parameters), `f d {"type":"object"}`},
	}
	for _, c := range checks {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}

func TestUnknownRoute(t *testing.T) {
	s := New(t)
	resp, err := http.Get(s.URL + "/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status %d, want 404", resp.StatusCode)
	}
}

func TestStrict(t *testing.T) {
	const user = `[{"role":"user","content":"u"}]`
	const tool = `{"type":"function","function":{"name":"f"}}`
	const call = `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	tests := []struct {
		name     string
		messages string
		want     string // "": accepted
		extra    string // more top-level fields, each with a leading comma
	}{
		{"valid", `[{"role":"system","content":"s"},{"role":"user","content":"u"},` + call + `,{"role":"tool","tool_call_id":"c1","content":"r"},{"role":"assistant","content":"done"}]`, "", ""},
		{"null content with tool calls", `[{"role":"user","content":"u"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":""}]`, "", ""},
		{"late system", `[{"role":"user","content":"u"},{"role":"system","content":"s"}]`, "messages[1]: a system message after the first message", ""},
		{"missing content", `[{"role":"user"}]`, "messages[0]: a user message without content", ""},
		{"orphan tool result", `[{"role":"user","content":"u"},{"role":"tool","tool_call_id":"c9","content":"r"}]`, "messages[1]: tool result c9 does not follow its call", ""},
		{"unanswered call", `[{"role":"user","content":"u"},` + call + `,{"role":"user","content":"again"}]`, "messages[2]: 1 tool call(s) of the previous assistant message have no result", ""},
		{"unanswered last call", `[{"role":"user","content":"u"},` + call + `]`, "1 tool call(s) of the last assistant message have no result", ""},
		{"tool_choice with tools", user, "", `,"tools":[` + tool + `],"tool_choice":{"type":"function","function":{"name":"f"}}`},
		{"tool_choice without tools", user, "tool_choice is only allowed when tools are specified", `,"tool_choice":"none"`},
		{"tool_choice naming another tool", user, "tool_choice names function g, which is not among the tools", `,"tools":[` + tool + `],"tool_choice":{"type":"function","function":{"name":"g"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(t, Reply{Text: "ok"})
			s.SetStrict(true)
			resp, err := http.Post(s.URL+"/chat/completions", "application/json",
				strings.NewReader(`{"model":"m","messages":`+tc.messages+tc.extra+`}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			http.DefaultClient.CloseIdleConnections()
			if tc.want == "" {
				if resp.StatusCode != 200 {
					t.Errorf("status %d: %s", resp.StatusCode, body)
				}
				return
			}
			if resp.StatusCode != 400 || !strings.Contains(string(body), "fakeupstream strict: "+tc.want) {
				t.Errorf("status %d body %s, want 400 with %q", resp.StatusCode, body, tc.want)
			}
		})
	}
}
