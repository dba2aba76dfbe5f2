package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/graphs"
)

// TestDecodedChatKeepsNoPointerIntoTheBody checks that a stream's run
// holds its sampling parameters in the stream's renderer: a pointer into
// the decoded body would keep all of it (wire messages, tools, metadata)
// for as long as the stream lasts (issue 22).
func TestDecodedChatKeepsNoPointerIntoTheBody(t *testing.T) {
	gin.SetMode(gin.ReleaseMode)
	s := &Server{cfg: &graphs.Set{
		Server: graphs.Server{MaxBodyBytes: 1 << 20, SessionHeader: "X-Session-Id"},
		Graphs: map[string]*graphs.Graph{"support": {Name: "support"}},
	}}
	c, _ := gin.CreateTestContext(httptest.NewRecorder())
	c.Request = httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(
		`{"model":"support","stream":true,"temperature":0.5,"stop":"END","user":"u1","messages":[{"role":"user","content":"hi"}]}`))
	call, r := s.decodeChat(c)
	if call == nil || r == nil {
		t.Fatalf("decodeChat refused the request: %d", c.Writer.(interface{ Status() int }).Status())
	}
	p := call.req.Params
	if w, ok := r.(*sse); !ok || p != &w.params {
		t.Errorf("the run's Params point outside the stream's renderer: into the decoded body, which the stream would keep")
	}
	if p.Temperature == nil || *p.Temperature != 0.5 || len(p.Stop) != 1 || p.Stop[0] != "END" || p.User != "u1" {
		t.Errorf("Params = %+v, want temperature 0.5, stop [END], user u1", *p)
	}
	if len(call.req.Messages) != 1 || call.req.Messages[0].Content != "hi" {
		t.Errorf("Messages = %+v", call.req.Messages)
	}
}
