package gateway

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/graphs/diagram"
)

// diagramSuffix ends the path of a graph's diagram,
// /v1/graphs/{model}/diagram.svg.
const diagramSuffix = "/diagram.svg"

// graphDiagram serves GET /v1/graphs/{model}/diagram.svg: the graph drawn
// as SVG by package diagram. The route is a catch-all so that a graph
// whose name holds a slash (sent as %2F, which the router decodes) is
// found too.
func (s *Server) graphDiagram(c *gin.Context) {
	model, ok := strings.CutSuffix(strings.TrimPrefix(c.Param("path"), "/"), diagramSuffix)
	if !ok || model == "" {
		s.abort(c, errNoRoute(c))
		return
	}
	g, ok := s.cfg.Graphs[model]
	if !ok {
		s.abort(c, errModelNotFound(model))
		return
	}
	var b bytes.Buffer
	if err := diagram.SVG(&b, g); err != nil {
		s.log.Error("draw graph diagram", "graph", model, "err", err)
		s.abort(c, &Error{Status: http.StatusInternalServerError, Code: codeInternal, Message: "internal error"})
		return
	}
	// The drawing holds no script, and opened on its own it may load
	// nothing either; a reloaded config redraws it.
	c.Header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	c.Header("X-Content-Type-Options", "nosniff")
	c.Header("Cache-Control", "no-cache")
	c.Data(http.StatusOK, "image/svg+xml", b.Bytes())
}
