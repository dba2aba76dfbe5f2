package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// hostile is the fake provider and tool server of the red team: each model
// name is one way an upstream can hurt the gateway.
type hostile struct {
	toolCalls   atomic.Int64 // tool calls received
	toolNow     atomic.Int64 // tool calls running now
	toolPeak    atomic.Int64 // most tool calls running at once
	streamsOpen atomic.Int64 // "flood" streams still being written
}

// filler is what large bodies are made of, written from one buffer.
var filler = bytes.Repeat([]byte("a"), 64<<10)

func writeN(w io.Writer, n int) {
	for n > 0 {
		k := min(n, len(filler))
		if _, err := w.Write(filler[:k]); err != nil {
			return
		}
		n -= k
	}
}

func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/tool" {
		h.tool(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model    string            `json:"model"`
		Stream   bool              `json:"stream"`
		Messages []json.RawMessage `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	switch req.Model {
	case "echo-auth": // a 401 that echoes the key it got
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided. You sent Authorization: %s","type":"invalid_request_error"}}`, r.Header.Get("Authorization"))
	case "echo-body": // a 500 that echoes the request
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte("upstream crashed while handling "))
		w.Write(body)
	case "reset": // the connection dies under the request
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		}
	case "huge": // one 100 MB completion
		io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"`)
		writeN(w, 100<<20)
		io.WriteString(w, `"}}]}`)
	case "longline": // one SSE line of 50 MB
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"x","choices":[{"index":0,"delta":{"content":"`)
		writeN(w, 50<<20)
		io.WriteString(w, "\"}}]}\n\n")
	case "trickle": // a delta every 200ms, forever
		h.stream(w, r, 1<<30, 200*time.Millisecond, "tick ")
	case "flood": // deltas as fast as the gateway takes them
		h.streamsOpen.Add(1)
		defer h.streamsOpen.Add(-1)
		h.stream(w, r, 1<<30, 0, strings.Repeat("x", 1000))
	case "slow": // answers after 2s
		select {
		case <-time.After(2 * time.Second):
			answer(w, "slow but there")
		case <-r.Context().Done():
		}
	case "fanout": // asks for 2,000 tool calls in one turn, then answers
		if bytes.Contains(body, []byte(`"role":"tool"`)) {
			answer(w, "done with the tools")
			return
		}
		calls := make([]string, 2000)
		for i := range calls {
			calls[i] = fmt.Sprintf(`{"id":"c%d","type":"function","function":{"name":"work","arguments":"{}"}}`, i)
		}
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[%s]}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, strings.Join(calls, ","))
	default:
		if req.Stream {
			h.stream(w, r, 3, 0, "fine ")
			return
		}
		answer(w, "fine")
	}
}

func answer(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "application/json")
	t, _ := json.Marshal(text)
	fmt.Fprintf(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%s}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, t)
}

// stream sends n deltas of text, every gap, then a finish and [DONE].
func (h *hostile) stream(w http.ResponseWriter, r *http.Request, n int, gap time.Duration, text string) {
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	t, _ := json.Marshal(text)
	for i := 0; i < n; i++ {
		if gap > 0 {
			select {
			case <-time.After(gap):
			case <-r.Context().Done():
				return
			}
		}
		if _, err := fmt.Fprintf(w, "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%s}}]}\n\n", t); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
	io.WriteString(w, "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}\n\ndata: [DONE]\n\n")
}

// tool is a server tool that takes 50ms and counts how many run at once.
func (h *hostile) tool(w http.ResponseWriter, r *http.Request) {
	h.toolCalls.Add(1)
	now := h.toolNow.Add(1)
	defer h.toolNow.Add(-1)
	for {
		peak := h.toolPeak.Load()
		if now <= peak || h.toolPeak.CompareAndSwap(peak, now) {
			break
		}
	}
	time.Sleep(50 * time.Millisecond)
	io.WriteString(w, `{"ok":true}`)
}
