package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/redact"
	"github.com/switchboard-ai/switchboard/runtime"
)

// newProxies builds one reverse proxy per OpenAI-compatible provider, for
// server.passthrough, over the provider's own transport (transport, when
// not nil, gives it), so that its timeouts and connection pool hold for
// proxied calls too. Upstream addresses come only from config.
func newProxies(providers map[string]graphs.Provider, transport func(string) http.RoundTripper, log *slog.Logger) map[string]*httputil.ReverseProxy {
	out := make(map[string]*httputil.ReverseProxy)
	for name, p := range providers {
		if p.Kind != graphs.ProviderOpenAI || p.BaseURL == "" {
			continue
		}
		base, err := url.Parse(strings.TrimSuffix(p.BaseURL, "/"))
		if err != nil {
			continue
		}
		var rt http.RoundTripper
		if transport != nil {
			rt = transport(name)
		}
		out[name] = &httputil.ReverseProxy{
			Transport: rt,
			// Its own complaints (a body that failed mid-copy) go to the
			// gateway's log, in its format.
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
			Rewrite: func(r *httputil.ProxyRequest) {
				r.Out.URL.Scheme, r.Out.URL.Host = base.Scheme, base.Host
				r.Out.URL.Path = base.Path + "/chat/completions"
				r.Out.URL.RawPath = ""
				r.Out.Host = base.Host
				r.Out.Header.Del("Authorization")
				// Let the transport decompress, so an error body can be masked.
				r.Out.Header.Del("Accept-Encoding")
				if p.APIKey != "" {
					r.Out.Header.Set("Authorization", "Bearer "+p.APIKey)
				}
				for k, v := range p.Headers {
					r.Out.Header.Set(k, v)
				}
			},
			FlushInterval: -1,
			ModifyResponse: func(resp *http.Response) error {
				if resp.StatusCode >= 200 && resp.StatusCode < 300 {
					return proxyCallOf(resp.Request).bound(resp)
				}
				// An error answer may echo the provider key the gateway sent.
				return maskErrorBody(resp, p.APIKey)
			},
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				log.Warn("passthrough failed", "provider", p.Name, "err", redact.Secrets(redact.Known(err.Error(), p.APIKey)))
				e := proxyCallOf(r).failure(err)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(e.Status)
				_ = json.NewEncoder(w).Encode(e.body())
			},
		}
	}
	return out
}

// passthrough proxies a request for "provider/model" as is, with only the
// model name rewritten to the provider's. It reports false when the model
// names no passthrough provider.
func (s *Server) passthrough(c *gin.Context, modelName string, body []byte) bool {
	provider, upstreamModel, ok := strings.Cut(modelName, "/")
	proxy := s.proxies[provider]
	if !ok || proxy == nil || upstreamModel == "" {
		return false
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return false
	}
	doc["model"], _ = json.Marshal(upstreamModel)
	out, err := json.Marshal(doc)
	if err != nil {
		return false
	}
	r, pc, done := startProxyCall(c.Request, s.cfg.Providers[provider])
	defer done()
	r.Body = readCloser{bytes.NewReader(out)}
	r.ContentLength = int64(len(out))
	r.Header.Set("Content-Length", strconv.Itoa(len(out)))
	// The session header is the gateway's; it names nothing upstream.
	r.Header.Del(s.cfg.Server.SessionHeader)
	w := &proxyWriter{ResponseWriter: c.Writer, rc: http.NewResponseController(c.Writer), timeout: s.streamWriteTimeout()}
	if !serveProxy(proxy, w, r) || pc.failed != nil {
		s.log.Warn("passthrough failed mid-answer", "provider", provider, "err", pc.failed)
		if !c.Writer.Written() {
			// Failed before a byte of the answer left (its first read was
			// already too large): the client gets the error instead.
			h := c.Writer.Header()
			clear(h)
			e := pc.failure(pc.failed)
			h.Set("Content-Type", "application/json")
			c.Writer.WriteHeader(e.Status)
			_ = json.NewEncoder(c.Writer).Encode(e.body())
		} else {
			// The answer failed once its status was sent (too large, a
			// stream gone idle or past the timeout, a client that stopped
			// reading): the response is cut short, so that the client sees
			// it fail rather than end. The deadline makes net/http's end
			// of the response fail, and net/http then closes the
			// connection.
			_ = w.rc.SetWriteDeadline(time.Unix(1, 0))
		}
	}
	// Charged to the key's token limits as a run's tokens are.
	recordUsage(c, runtime.Usage{TotalTokens: int(pc.tokens)})
	return true
}

// serveProxy proxies r; false when the proxy gave up copying the answer
// (it panics http.ErrAbortHandler then, which net/http would take as
// leave to cut the response; gin's recovery takes it as a broken pipe and
// ends the response as if whole).
func serveProxy(proxy *httputil.ReverseProxy, w http.ResponseWriter, r *http.Request) (whole bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler { //nolint:errorlint // the proxy panics with the value itself
				panic(v)
			}
			whole = false
		}
	}()
	proxy.ServeHTTP(w, r)
	return true
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// maxMaskedBody bounds what is read of a passthrough error answer to mask
// it; the rest is dropped.
const maxMaskedBody = 64 << 10

// maskErrorBody masks credentials in a non-2xx answer's body, which
// providers sometimes fill with the request's headers.
func maskErrorBody(resp *http.Response, key string) error {
	if resp.StatusCode < 400 || resp.Header.Get("Content-Encoding") != "" {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxMaskedBody))
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	masked := redact.Secrets(redact.Known(string(b), key))
	resp.Body = io.NopCloser(strings.NewReader(masked))
	resp.ContentLength = int64(len(masked))
	resp.Header.Set("Content-Length", strconv.Itoa(len(masked)))
	return nil
}
