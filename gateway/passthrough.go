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

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/redact"
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
			// An error answer may echo the provider key the gateway sent.
			ModifyResponse: func(resp *http.Response) error { return maskErrorBody(resp, p.APIKey) },
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				log.Warn("passthrough failed", "provider", p.Name, "err", redact.Secrets(redact.Known(err.Error(), p.APIKey)))
				// The transport's error names addresses; the client is told
				// only which provider failed.
				e := &Error{Status: http.StatusBadGateway, Code: codeUpstreamError, Message: "provider " + p.Name + " unreachable or failed before answering"}
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
	r := c.Request.Clone(c.Request.Context())
	r.Body = readCloser{bytes.NewReader(out)}
	r.ContentLength = int64(len(out))
	r.Header.Set("Content-Length", strconv.Itoa(len(out)))
	proxy.ServeHTTP(c.Writer, r)
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
