package gateway

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"

	"github.com/gin-gonic/gin"
)

// The console (GET /console) is one page, its script and its stylesheet,
// embedded in the binary: it loads nothing from anywhere but the gateway,
// and it calls only the public API (/v1/...), with the caller's key.
//
//go:embed console/index.html console/console.css console/console.js
var consoleFiles embed.FS

// consoleCSP lets the page load its own script and stylesheet and call the
// gateway, and nothing else: no remote source, no inline script (a
// diagram's inline styles are allowed, its scripts never run). The data:
// image is the page's icon.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// consoleAssets are the files served under /console/, with their types.
var consoleAssets = map[string]string{
	"console.css": "text/css; charset=utf-8",
	"console.js":  "text/javascript; charset=utf-8",
}

// consolePage renders the page once: it differs between gateways only by
// the session header's name, which the script must send.
func consolePage(sessionHeader string) []byte {
	t := template.Must(template.ParseFS(consoleFiles, "console/index.html"))
	var b bytes.Buffer
	if err := t.Execute(&b, struct{ SessionHeader string }{sessionHeader}); err != nil {
		// The template is embedded and takes one string: it cannot fail.
		panic("console page: " + err.Error())
	}
	return b.Bytes()
}

// routeConsole serves GET /console and its assets. They need no key: they
// are the same for everyone and hold no data; the page asks for a key when
// /v1/models answers 401.
func (s *Server) routeConsole(e *gin.Engine) {
	page := consolePage(s.cfg.Server.SessionHeader)
	pageHandler := func(c *gin.Context) {
		consoleHeaders(c)
		c.Data(http.StatusOK, "text/html; charset=utf-8", page)
	}
	e.GET("/console", pageHandler)
	e.HEAD("/console", pageHandler)
	fileHandler := func(c *gin.Context) {
		name := c.Param("file")
		ctype, ok := consoleAssets[name]
		if !ok {
			s.abort(c, &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no console file " + name})
			return
		}
		body, err := consoleFiles.ReadFile("console/" + name)
		if err != nil {
			s.abort(c, &Error{Status: http.StatusInternalServerError, Code: codeInternal, Message: "internal error"})
			return
		}
		consoleHeaders(c)
		c.Data(http.StatusOK, ctype, body)
	}
	e.GET("/console/:file", fileHandler)
	e.HEAD("/console/:file", fileHandler)
}

func consoleHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// A new binary may bring a new page: always revalidate.
	h.Set("Cache-Control", "no-cache")
}
