package goclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"

	"github.com/switchboard-ai/switchboard/internal/openapicheck"
)

// need returns an environment variable e2e/run.sh sets.
func need(t *testing.T, name string) string {
	t.Helper()
	v := strings.TrimRight(os.Getenv(name), "/")
	if v == "" {
		t.Fatalf("%s is not set: run the suite with e2e/run.sh", name)
	}
	return v
}

// judge is a transport that has OpenAI's published schema validate every
// answer the client reads, chunk by chunk for streams, and counts them.
type judge struct {
	t      *testing.T
	base   http.RoundTripper
	check  *openapicheck.Checker
	mu     sync.Mutex
	judged int
}

func (j *judge) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := j.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	n, err := j.check.CheckReply(req.Method, req.URL.Path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	if err != nil {
		j.t.Errorf("%s %s: the published OpenAI schema refuses the reply: %v", req.Method, req.URL.Path, err)
	}
	j.mu.Lock()
	j.judged += n
	j.mu.Unlock()
	return resp, nil
}

// newClient is an official client for the gateway at base (no /v1),
// without retries so that every failure shows, whose every answer is
// judged by the published schema.
func newClient(t *testing.T, base string, opts ...option.RequestOption) openai.Client {
	t.Helper()
	c := openapicheck.ForTest(t)
	if c == nil {
		t.Fatal("the published schema is needed to judge the gateway (../shared/specs)")
	}
	j := &judge{t: t, base: http.DefaultTransport, check: c}
	t.Cleanup(func() {
		if !t.Failed() && j.judged == 0 {
			t.Errorf("no answer of the gateway was judged by the published schema")
		}
	})
	all := append([]option.RequestOption{
		option.WithBaseURL(base + "/v1"),
		option.WithAPIKey("unused"),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(10 * time.Second),
		option.WithHTTPClient(&http.Client{Transport: j}),
	}, opts...)
	return openai.NewClient(all...)
}

// gateway is a client for the desk gateway (e2e/desk.yaml).
func gateway(t *testing.T, opts ...option.RequestOption) openai.Client {
	t.Helper()
	return newClient(t, need(t, "GATEWAY_URL"), opts...)
}

// fake drives the scripted fake upstream's control API (see
// internal/fakeupstream/cmd/fakeupstream).
type fake struct {
	t    *testing.T
	base string
}

// fakeReply is one scripted reply; see the control API's scriptReply.
type fakeReply struct {
	Text         string         `json:"text,omitempty"`
	ToolCalls    []fakeToolCall `json:"tool_calls,omitempty"`
	StreamChunks []string       `json:"stream_chunks,omitempty"`
	Status       int            `json:"status,omitempty"`
	StreamError  string         `json:"stream_error,omitempty"`
	Usage        *fakeUsage     `json:"usage,omitempty"`
}

type fakeToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments any    `json:"arguments"`
}

type fakeUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// upstreamRequest is one request the fake received.
type upstreamRequest struct {
	Path string `json:"path"`
	Body struct {
		Model      string          `json:"model"`
		Stream     bool            `json:"stream"`
		ToolChoice json.RawMessage `json:"tool_choice"`
		Tools      []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
		} `json:"messages"`
	} `json:"body"`
	Raw json.RawMessage `json:"-"`
}

// newFake resets the fake upstream (script, recorded requests) and
// scripts replies.
func newFake(t *testing.T, replies ...fakeReply) *fake {
	t.Helper()
	f := &fake{t: t, base: need(t, "FAKE_URL")}
	f.control(http.MethodPost, "/_control/reset", nil, nil)
	if len(replies) > 0 {
		f.control(http.MethodPost, "/_control/script", replies, nil)
	}
	return f
}

// requests lists what the upstream received since the reset.
func (f *fake) requests() []upstreamRequest {
	f.t.Helper()
	var raws []json.RawMessage
	f.control(http.MethodGet, "/_control/requests", nil, &raws)
	out := make([]upstreamRequest, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			f.t.Fatalf("recorded request %d: %v", i, err)
		}
		out[i].Raw = raw
	}
	return out
}

// models lists the model each upstream request asked for.
func (f *fake) models() []string {
	f.t.Helper()
	var out []string
	for _, r := range f.requests() {
		out = append(out, r.Body.Model)
	}
	return out
}

func (f *fake) control(method, path string, in, out any) {
	f.t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			f.t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, f.base+path, body)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("fake upstream %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("fake upstream %s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			f.t.Fatalf("fake upstream %s %s: %v", method, path, err)
		}
	}
}

var fieldType = reflect.TypeFor[respjson.Field]()

// requireFields walks a value the SDK decoded and reports every field the
// SDK marks `api:"required"` that the JSON did not carry (null counts as
// carried: OpenAI sends refusal and logprobs as null), and every field
// whose JSON value had a type the SDK did not expect.
func requireFields(t *testing.T, name string, v any) {
	t.Helper()
	for _, p := range fieldProblems(name, reflect.ValueOf(v)) {
		t.Error(p)
	}
}

func fieldProblems(path string, v reflect.Value) []string {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return fieldProblems(path, v.Elem())
	case reflect.Slice, reflect.Array:
		var out []string
		for i := 0; i < v.Len(); i++ {
			out = append(out, fieldProblems(fmt.Sprintf("%s[%d]", path, i), v.Index(i))...)
		}
		return out
	case reflect.Struct:
	default:
		return nil
	}
	meta := v.FieldByName("JSON")
	if !meta.IsValid() || meta.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	typ := v.Type()
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if !f.IsExported() || f.Name == "JSON" {
			continue
		}
		m := meta.FieldByName(f.Name)
		if !m.IsValid() || m.Type() != fieldType {
			continue
		}
		jf := m.Interface().(respjson.Field)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		at := path + "." + key
		raw := jf.Raw()
		switch {
		case raw == respjson.Omitted && strings.Contains(f.Tag.Get("api"), "required"):
			out = append(out, at+": required by the SDK, missing")
		case raw != respjson.Omitted && raw != respjson.Null && !jf.Valid():
			out = append(out, fmt.Sprintf("%s: the SDK cannot read %s", at, raw))
		case jf.Valid():
			out = append(out, fieldProblems(at, v.Field(i))...)
		}
	}
	return out
}

// extra decodes a field the SDK does not know (the gateway's metadata).
func extra(t *testing.T, fields map[string]respjson.Field, name string, v any) {
	t.Helper()
	f, ok := fields[name]
	if !ok {
		t.Fatalf("no %q in the reply", name)
	}
	if err := json.Unmarshal([]byte(f.Raw()), v); err != nil {
		t.Fatalf("%s: %v (%s)", name, err, f.Raw())
	}
}

// metadata is the gateway's metadata on replies and chunks.
type metadata struct {
	AgentName  string `json:"agentName"`
	SessionID  string `json:"sessionId"`
	Event      string `json:"event"`
	From       string `json:"from"`
	To         string `json:"to"`
	ToolCallID string `json:"toolCallId"`
}

// sessionID is unique per run, so that a Redis store never carries state over.
func sessionID(name string) string {
	return fmt.Sprintf("go-e2e-%s-%d", name, time.Now().UnixNano())
}

// user is a one-user-message request for the support graph.
func user(text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "support",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)},
	}
}
