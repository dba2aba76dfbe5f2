package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/graphs"
)

// benchBody is a chat request of n messages with tools and metadata, as a
// client resending its history sends it.
func benchBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"support","temperature":0.2,"metadata":{"plan":"pro"},"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"messages":[{"role":"system","content":"Answer briefly."}`)
	for i := range n - 1 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		fmt.Fprintf(&b, `,{"role":%q,"content":"message %d: %s"}`, role, i, strings.Repeat("lorem ipsum ", 10))
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func BenchmarkDecodeChatRequest(b *testing.B) {
	// The request of bench/streams: what fastChat decodes.
	plain := []byte(`{"model":"support","stream":true,"messages":[{"role":"system","content":"Answer briefly."},{"role":"user","content":"What did you charge me for last month?"}]}`)
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(plain)))
		for b.Loop() {
			if _, e := decodeChatRequest(plain); e != nil {
				b.Fatal(e.Message)
			}
		}
	})
	for _, n := range []int{2, 50} {
		body := benchBody(n)
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, e := decodeChatRequest(body); e != nil {
					b.Fatal(e.Message)
				}
			}
		})
	}
}

// BenchmarkSSEEncode writes one content chunk of a stream.
func BenchmarkSSEEncode(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	c.Writer = &discardWriter{ResponseWriter: c.Writer}
	w := &sse{c: c, stream: (&Server{cfg: &graphs.Set{}}).guardStream(c), idJSON: newStreamID(), created: 1700000000, model: "support", started: true, sentRole: true}
	w.stream.started = true // the headers are sent: what is measured is a chunk
	text := " word"
	meta := chunkMetadata{AgentName: "billing"}
	b.ReportAllocs()
	for b.Loop() {
		w.write(&chunkDelta{Content: &text}, nil, nil, &meta, nil)
	}
}

// discardWriter drops what is written, so that the benchmark measures the
// encoding and not a growing recorder.
type discardWriter struct{ gin.ResponseWriter }

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (discardWriter) Flush()                      {}
