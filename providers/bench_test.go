package providers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchboard-ai/switchboard/runtime"
)

// BenchmarkBody builds a provider call's body from go-openai's and the
// call's messages, for a short and a long session (the history and the
// turn's own messages as two runs, as a session's call has them).
func BenchmarkBody(b *testing.B) {
	goBody := []byte(`{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`)
	for _, turns := range []int{1, 200} {
		var history []runtime.Message
		for i := range turns {
			history = append(history,
				runtime.Message{Role: runtime.RoleUser, Content: fmt.Sprintf("Turn %d: hello there, what can you do for me today?", i)},
				runtime.Message{Role: runtime.RoleAssistant, Content: "Hello! How can I help you today?"})
		}
		p := &bodyPatch{messages: runtime.Prompt{
			{{Role: runtime.RoleSystem, Content: "You are a helpful assistant."}},
			history,
			{{Role: runtime.RoleUser, Content: "And now?"}},
		}}
		var pool bodyBuffers
		b.Run(fmt.Sprintf("messages=%d", p.messages.Len()), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req, err := http.NewRequest(http.MethodPost, "http://x.invalid/v1/chat/completions", bytes.NewReader(goBody))
				if err != nil {
					b.Fatal(err)
				}
				if err := p.apply(req, &pool); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEventReader reads a streamed answer of 100 content chunks.
func BenchmarkEventReader(b *testing.B) {
	chunk := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}` + "\n\n"
	body := []byte(strings.Repeat(chunk, 100) + "data: [DONE]\n\n")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		e := newEventReader(bytes.NewReader(body), nil)
		for {
			if _, err := e.next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
		closeEvents(e)
	}
}

// BenchmarkEventArrivals reads 100 content chunks that arrive one at a
// time, as a slow stream's do: each read returns one event, and the wait
// for the next is a read of its own.
func BenchmarkEventArrivals(b *testing.B) {
	chunk := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}` + "\n\n")
	b.SetBytes(int64(100 * len(chunk)))
	b.ReportAllocs()
	body := &oneEventReads{}
	for b.Loop() {
		body.event, body.left, body.off = chunk, 100, 0
		e := newEventReader(body, nil)
		for {
			if _, err := e.next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
		closeEvents(e)
	}
}

// closeEvents ends a reader's stream as call.stream does, where the reader
// has a close (it puts its buffer back).
func closeEvents(e any) {
	if c, ok := e.(interface{ close() }); ok {
		c.close()
	}
}

// oneEventReads returns left copies of event, one read at most each.
type oneEventReads struct {
	event     []byte
	left, off int
}

func (r *oneEventReads) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.event[r.off:])
	if r.off += n; r.off == len(r.event) {
		r.off, r.left = 0, r.left-1
	}
	return n, nil
}

// BenchmarkDecodeChunk decodes one text chunk as a stream does once it has
// its id (readChunk), and as it did before (encoding/json into a fresh
// chunk).
func BenchmarkDecodeChunk(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" word"},"logprobs":null,"finish_reason":null}]}`)
	b.Run("readChunk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var f chunkRead
			if !readChunk(data, &f, false) {
				b.Fatal("readChunk gave up")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c openai.ChatCompletionStreamResponse
			if err := json.Unmarshal(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
