package fakeupstream

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// answer writes one scripted reply.
type answer struct {
	w       http.ResponseWriter
	ctx     context.Context
	closing <-chan struct{}
	req     *ChatRequest
	reply   Reply
	id      string
}

// serve writes the reply: an error, a hang, a chat.completion or a stream.
func (a *answer) serve() {
	r := &a.reply
	r.Func = nil // a computed reply cannot compute again
	if r.Delay > 0 && !a.wait(r.Delay) {
		return
	}
	if r.Hang {
		a.wait(-1)
		return
	}
	h := a.w.Header()
	for k, vs := range r.Header {
		h[k] = append([]string(nil), vs...)
	}
	if r.RetryAfter != "" {
		h.Set("Retry-After", r.RetryAfter)
	}
	if r.Status != 0 && r.Status != http.StatusOK {
		msg := r.Text
		if msg == "" {
			msg = http.StatusText(r.Status)
		}
		writeError(a.w, r.Status, msg)
		return
	}
	if a.req.Stream {
		a.stream()
		return
	}
	a.complete()
}

// wait sleeps for d (forever when d < 0) and reports whether the reply
// should go on: false when the client went away or the server is closing.
func (a *answer) wait(d time.Duration) bool {
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
		return true
	case <-a.ctx.Done():
	case <-a.closing:
	}
	return false
}

// finishReason is the reply's finish reason with its default applied.
func (a *answer) finishReason() string {
	switch {
	case a.reply.FinishReason != "":
		return a.reply.FinishReason
	case len(a.reply.ToolCalls) > 0:
		return "tool_calls"
	}
	return "stop"
}

// usage is the reply's usage with its defaults applied.
func (a *answer) usage() Usage {
	u := Usage{PromptTokens: 10, CompletionTokens: 5}
	if a.reply.Usage != nil {
		u = *a.reply.Usage
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u
}

// complete writes a non-streamed chat.completion.
func (a *answer) complete() {
	var content any = a.reply.Text
	if a.reply.Text == "" && len(a.reply.ToolCalls) > 0 {
		content = nil // OpenAI sends null content with tool calls
	}
	msg := map[string]any{"role": "assistant", "content": content, "refusal": nil}
	if a.reply.Refusal != "" {
		msg["content"], msg["refusal"] = nil, a.reply.Refusal
	}
	if len(a.reply.ToolCalls) > 0 {
		msg["tool_calls"] = a.reply.ToolCalls
	}
	body, err := json.Marshal(map[string]any{
		"id":      a.id,
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   a.req.Model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       msg,
			"logprobs":      nil,
			"finish_reason": a.finishReason(),
		}},
		"usage": a.usage(),
	})
	if err != nil {
		writeError(a.w, http.StatusInternalServerError, "fakeupstream: "+err.Error())
		return
	}
	a.w.Header().Set("Content-Type", "application/json")
	if !a.reply.Abort {
		_, _ = a.w.Write(body)
		return
	}
	a.w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	a.w.WriteHeader(http.StatusOK)
	_, _ = a.w.Write(body[:len(body)/2])
	http.NewResponseController(a.w).Flush()
	panic(http.ErrAbortHandler) // drops the connection mid-body
}

// writeError writes an OpenAI error body.
func writeError(w http.ResponseWriter, status int, message string) {
	typ, code := "invalid_request_error", any(nil)
	switch {
	case status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": typ, "param": nil, "code": code,
	}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
