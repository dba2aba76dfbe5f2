// Command slowupstream is the fake provider of the long-streams benchmark
// (go run ./bench -streams): every streamed answer sends a content chunk,
// then one more every -gap until -chunks have left, then the finish and
// usage chunks and [DONE], as a slow LLM does. It runs as its own process
// so that its connections do not count against the open-file limit of the
// load generator (a stream holds one here and one there).
//
// Model "fast" answers with no gap (warm-ups); model "triage" answers at
// once with a transfer_to_billing tool call, so that a streamed run through
// the gateway's support graph makes a handoff before its slow answer.
// POST /close-idle closes the idle keep-alive connections of the server,
// so that a target's connection pool empties between two phases.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"
)

var (
	head = []byte(`data: {"id":"chatcmpl-slow","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}` + "\n\n")
	word = []byte(`data: {"id":"chatcmpl-slow","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}` + "\n\n")
	tail = []byte(`data: {"id":"chatcmpl-slow","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"chatcmpl-slow","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[],"usage":{"prompt_tokens":24,"completion_tokens":25,"total_tokens":49}}` + "\n\n" +
		"data: [DONE]\n\n")
	transfer = []byte(`data: {"id":"chatcmpl-slow","object":"chat.completion.chunk","created":1700000000,"model":"triage","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_transfer","type":"function","function":{"name":"transfer_to_billing","arguments":"{}"}}]},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"chatcmpl-slow","object":"chat.completion.chunk","created":1700000000,"model":"triage","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" +
		"data: [DONE]\n\n")
	plain = []byte(`{"id":"chatcmpl-slow","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":24,"completion_tokens":1,"total_tokens":25}}`)
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "listen address")
	gap := flag.Duration("gap", 200*time.Millisecond, "time between two content chunks")
	chunks := flag.Int("chunks", 25, "content chunks per stream")
	flag.Parse()
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(plain)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		f := w.(http.Flusher)
		switch {
		case bytes.Contains(body, []byte(`"model":"triage"`)):
			_, _ = w.Write(transfer)
			f.Flush()
			return
		case bytes.Contains(body, []byte(`"model":"fast"`)):
			stream(w, f, 0, *chunks)
		default:
			stream(w, f, *gap, *chunks)
		}
	})
	mux.HandleFunc("POST /close-idle", func(w http.ResponseWriter, r *http.Request) {
		// Turning keep-alives off closes the idle connections; the
		// connection of this request closes once it is answered.
		srv.SetKeepAlivesEnabled(false)
		srv.SetKeepAlivesEnabled(true)
		w.Header().Set("Connection", "close")
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "go_goroutines %d\n", runtime.NumGoroutine())
	})
	srv.Handler = mux
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	// The harness starts it on port 0 and reads the address here.
	fmt.Fprintf(os.Stderr, "{\"msg\":\"slowupstream listening\",\"addr\":%q}\n", ln.Addr().String())
	log.Fatal(srv.Serve(ln))
}

// stream sends n content chunks gap apart, then the end of the answer a gap
// after the last one.
func stream(w io.Writer, f http.Flusher, gap time.Duration, n int) {
	next := time.Now()
	for i := range n {
		if i == 0 {
			_, _ = w.Write(head)
		} else {
			_, _ = w.Write(word)
		}
		f.Flush()
		next = next.Add(gap)
		time.Sleep(time.Until(next))
	}
	_, _ = w.Write(tail)
	f.Flush()
}
