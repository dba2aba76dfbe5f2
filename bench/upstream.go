package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// upstream is the benchmark's fake OpenAI-compatible provider. Unlike
// internal/fakeupstream it records nothing and answers from canned bytes,
// so that what it costs is small and the same for every target. It answers
// by the request's model:
//
//	plain    a short text answer
//	triage   a transfer_to_billing tool call
//	billing  a lookup_charges tool call, or text once the call's result is in
//
// A request with "stream":true is answered as SSE: streamChunks content
// chunks chunkGap apart, then the finish and usage chunks.
type upstream struct {
	srv      *http.Server
	ln       net.Listener
	chunkGap time.Duration
	bufs     sync.Pool
}

const streamChunks = 10

var (
	plainReply   = []byte(`{"id":"chatcmpl-fake","object":"chat.completion","created":1700000000,"model":"plain","choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help you today?"},"finish_reason":"stop"}],"usage":{"prompt_tokens":24,"completion_tokens":9,"total_tokens":33}}`)
	triageReply  = []byte(`{"id":"chatcmpl-fake","object":"chat.completion","created":1700000000,"model":"triage","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_transfer","type":"function","function":{"name":"transfer_to_billing","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":60,"completion_tokens":5,"total_tokens":65}}`)
	lookupReply  = []byte(`{"id":"chatcmpl-fake","object":"chat.completion","created":1700000000,"model":"billing","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_lookup","type":"function","function":{"name":"lookup_charges","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":80,"completion_tokens":5,"total_tokens":85}}`)
	billingReply = []byte(`{"id":"chatcmpl-fake","object":"chat.completion","created":1700000000,"model":"billing","choices":[{"index":0,"message":{"role":"assistant","content":"You were charged $19.99 on May 2 for the Pro plan."},"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"completion_tokens":15,"total_tokens":135}}`)
	chargesReply = []byte(`{"charges":[{"id":"ch_1","amount":1999,"currency":"usd","date":"2025-05-02"}]}`)

	streamHead   = []byte(`data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1700000000,"model":"plain","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}` + "\n\n")
	streamChunk  = []byte(`data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1700000000,"model":"plain","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}` + "\n\n")
	streamFinish = []byte(`data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1700000000,"model":"plain","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1700000000,"model":"plain","choices":[],"usage":{"prompt_tokens":24,"completion_tokens":10,"total_tokens":34}}` + "\n\n" +
		"data: [DONE]\n\n")
)

// startUpstream serves on a free loopback port.
func startUpstream(chunkGap time.Duration) (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	u := &upstream{ln: ln, chunkGap: chunkGap}
	u.bufs.New = func() any { return new(bytes.Buffer) }
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", u.chat)
	mux.HandleFunc("POST /charges", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		writeJSON(w, chargesReply)
	})
	u.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

// url is the base URL of the OpenAI API (ending in /v1).
func (u *upstream) url() string { return "http://" + u.ln.Addr().String() + "/v1" }

// chargesURL is the lookup_charges tool's endpoint.
func (u *upstream) chargesURL() string { return "http://" + u.ln.Addr().String() + "/charges" }

func (u *upstream) close() { _ = u.srv.Close() }

func (u *upstream) chat(w http.ResponseWriter, r *http.Request) {
	buf := u.bufs.Get().(*bytes.Buffer)
	defer u.bufs.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(r.Body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body := buf.Bytes()
	if bytes.Contains(body, []byte(`"stream":true`)) {
		u.stream(w)
		return
	}
	switch model(body) {
	case "triage":
		writeJSON(w, triageReply)
	case "billing":
		if bytes.Contains(body, []byte(`"tool_call_id":"call_lookup"`)) {
			writeJSON(w, billingReply)
		} else {
			writeJSON(w, lookupReply)
		}
	default:
		writeJSON(w, plainReply)
	}
}

func (u *upstream) stream(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f := w.(http.Flusher)
	_, _ = w.Write(streamHead)
	f.Flush()
	for range streamChunks - 1 {
		time.Sleep(u.chunkGap)
		_, _ = w.Write(streamChunk)
		f.Flush()
	}
	_, _ = w.Write(streamFinish)
	f.Flush()
}

// model finds the "model" value of a request body without decoding it.
func model(body []byte) string {
	key := []byte(`"model":"`)
	i := bytes.Index(body, key)
	if i < 0 {
		return ""
	}
	rest := body[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}

func writeJSON(w http.ResponseWriter, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}
