package fakeupstream

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"time"
)

// stream writes a streamed reply the way OpenAI does: a role chunk, content
// chunks, tool call chunks (id and name first, then the arguments in
// pieces), a chunk with the finish reason, the usage chunk when the request
// asked for it, then [DONE].
func (a *answer) stream() {
	h := a.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	a.w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(a.w)
	_ = rc.Flush()
	if a.reply.Together {
		// Every event is written to a buffer, which goes in one write at
		// the end.
		w := a.w
		var all bytes.Buffer
		a.w = togetherWriter{ResponseWriter: w, buf: &all}
		defer func() {
			a.w = w
			_, _ = w.Write(all.Bytes())
			_ = rc.Flush()
		}()
		rc = http.NewResponseController(a.w)
	}

	includeUsage := a.req.StreamOptions != nil && a.req.StreamOptions.IncludeUsage
	created := time.Now().Unix()
	sent := 0
	// send writes one chunk after the reply's ChunkDelay and reports whether
	// the client is still there. The role chunk and the first chunk after
	// it go together, as with OpenAI, so a stalled stream has said something.
	send := func(choices []any, usage *Usage) bool {
		if sent >= 2 && a.reply.ChunkDelay > 0 && !a.wait(a.reply.ChunkDelay) {
			return false
		}
		if sent >= 2 && a.reply.Gate != nil {
			select {
			case <-a.reply.Gate:
			case <-a.ctx.Done():
				return false
			}
		}
		sent++
		chunk := map[string]any{
			"id":      a.id,
			"object":  "chat.completion.chunk",
			"created": created,
			"model":   a.req.Model,
			"choices": choices,
		}
		if includeUsage {
			chunk["usage"] = usage // null on every chunk but the last, as OpenAI does
		}
		return a.event(rc, chunk)
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "logprobs": nil, "finish_reason": finish}}
	}

	if !send(delta(map[string]any{"role": "assistant", "content": ""}, nil), nil) {
		return
	}
	pieces, key := a.reply.StreamChunks, "content"
	if a.reply.Refusal != "" {
		key = "refusal"
	}
	if pieces == nil {
		pieces = split(cmp.Or(a.reply.Refusal, a.reply.Text), 3)
	}
	for _, p := range pieces {
		if !send(delta(map[string]any{key: p}, nil), nil) {
			return
		}
	}
	if a.reply.Abort {
		panic(http.ErrAbortHandler) // drops the connection mid-stream
	}
	for i, c := range a.reply.ToolCalls {
		head := map[string]any{"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}
		if !send(delta(map[string]any{"tool_calls": []any{head}}, nil), nil) {
			return
		}
		for _, p := range split(c.Arguments, 2) {
			part := map[string]any{"index": i, "function": map[string]any{"arguments": p}}
			if !send(delta(map[string]any{"tool_calls": []any{part}}, nil), nil) {
				return
			}
		}
	}
	if a.reply.StreamError != "" {
		a.event(rc, map[string]any{"error": map[string]any{
			"message": a.reply.StreamError, "type": "server_error", "param": nil, "code": nil,
		}})
		return
	}
	if !send(delta(map[string]any{}, a.finishReason()), nil) {
		return
	}
	if includeUsage {
		u := a.usage()
		if !send([]any{}, &u) {
			return
		}
	}
	_, _ = a.w.Write([]byte("data: [DONE]\n\n"))
	_ = rc.Flush()
}

// event writes one SSE data event and flushes it; false when the client is
// gone.
func (a *answer) event(rc *http.ResponseController, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	buf := make([]byte, 0, len(b)+8)
	buf = append(append(append(buf, "data: "...), b...), "\n\n"...)
	if _, err := a.w.Write(buf); err != nil {
		return false
	}
	return rc.Flush() == nil && a.ctx.Err() == nil
}

// split cuts s into at most n pieces of about equal length, on rune
// boundaries; an empty s gives no piece.
func split(s string, n int) []string {
	runes := []rune(s)
	if len(runes) == 0 {
		return nil
	}
	size := (len(runes) + n - 1) / n
	var out []string
	for len(runes) > 0 {
		k := min(size, len(runes))
		out = append(out, string(runes[:k]))
		runes = runes[k:]
	}
	return out
}

// togetherWriter keeps what a Together reply writes, and its flushes do
// nothing: the reply leaves in one write at its end.
type togetherWriter struct {
	http.ResponseWriter
	buf *bytes.Buffer
}

func (w togetherWriter) Write(b []byte) (int, error) { return w.buf.Write(b) }

func (togetherWriter) Flush() {}
