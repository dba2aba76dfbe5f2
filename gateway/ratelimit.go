package gateway

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/ratelimit"
	"github.com/switchboard-ai/switchboard/runtime"
)

// Limiter counts each principal's requests and tokens against its key's
// limits (server.api_keys[].limits), where every gateway on the same store
// sees the same counts. cache implements it for memory and Redis.
type Limiter interface {
	// Admit counts one request of principal and says whether it may go
	// on: refused when the requests of the last minute reached the limit,
	// or the tokens already used in a token window did.
	Admit(ctx context.Context, principal string, l graphs.Limits) (ratelimit.State, error)
	// Charge counts the tokens a request of principal used, once its run
	// is over.
	Charge(ctx context.Context, principal string, l graphs.Limits, tokens int64) error
}

const codeRateLimited = "rate_limit_exceeded"

// usageKey is where a handler leaves the tokens its run used.
const usageKey = "switchboard.usage"

// recordUsage leaves a run's usage for rateLimit to charge.
func recordUsage(c *gin.Context, u runtime.Usage) { c.Set(usageKey, int64(u.TotalTokens)) }

// rateLimit admits a request of a key with limits, answers 429
// rate_limit_exceeded when the key is over one, and sets OpenAI's
// x-ratelimit-* headers on every reply of such a key. Every /v1 request
// counts as a request; a run's tokens are charged when it is over.
func (s *Server) rateLimit(c *gin.Context) {
	if s.opts.Limiter == nil {
		return
	}
	who := principal(c)
	var lim graphs.Limits
	for _, k := range s.cfg.Server.APIKeys {
		if k.Name == who {
			lim = k.Limits
			break
		}
	}
	if !lim.Any() {
		return
	}
	st, err := s.opts.Limiter.Admit(c.Request.Context(), who, lim)
	if err != nil {
		// Fail closed: a limit that cannot be counted is not lifted.
		s.log.Warn("rate limit check failed", "principal", who, "err", err)
		s.reject(c, &Error{Status: http.StatusServiceUnavailable, Code: codeStoreUnavailable, Message: "the rate limit store cannot be reached; retry later"})
		return
	}
	setRateHeaders(c.Writer.Header(), st)
	if !st.Allowed {
		c.Header("Retry-After", strconv.FormatInt(int64(math.Ceil(max(st.RetryAfter, time.Second).Seconds())), 10))
		s.reject(c, rateLimitError(who, lim, st))
		return
	}
	c.Next()
	tokens := c.GetInt64(usageKey)
	if tokens > 0 && (lim.TokensPerMinute > 0 || lim.TokensPerDay > 0) {
		if err := s.opts.Limiter.Charge(context.WithoutCancel(c.Request.Context()), who, lim, tokens); err != nil {
			s.log.Warn("rate limit: cannot charge a run's tokens", "principal", who, "tokens", tokens, "err", err)
		}
	}
}

// The x-ratelimit-* headers, in canonical form so that they are set
// without being canonicalised per request.
var rateHeaders = [2][3]string{
	{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
	{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
}

// setRateHeaders writes OpenAI's x-ratelimit-* headers for the limits the
// key has.
func setRateHeaders(h http.Header, st ratelimit.State) {
	for i, w := range [2]ratelimit.Window{st.Requests, st.Tokens} {
		if w.Limit == 0 {
			continue
		}
		k := rateHeaders[i]
		h[k[0]] = []string{strconv.FormatInt(w.Limit, 10)}
		h[k[1]] = []string{strconv.FormatInt(w.Remaining, 10)}
		h[k[2]] = []string{resetString(w.Reset)}
	}
}

// resetString formats a reset time as OpenAI does ("20ms", "1s", "6m0s"):
// whole milliseconds under a second, whole seconds above, rounded up.
func resetString(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return (d + time.Second - 1).Truncate(time.Second).String()
}

// rateLimitError is the 429 of a refused request, shaped as OpenAI's: type
// "requests" or "tokens", code rate_limit_exceeded.
func rateLimitError(who string, lim graphs.Limits, st ratelimit.State) *Error {
	what := fmt.Sprintf("requests per minute (RPM): limit %d", lim.RequestsPerMinute)
	if st.Exceeded == "tokens" {
		what = "tokens per minute (TPM)"
		if lim.TokensPerMinute > 0 {
			what += fmt.Sprintf(": limit %d", lim.TokensPerMinute)
		}
		switch {
		case lim.TokensPerDay > 0 && lim.TokensPerMinute > 0:
			what = fmt.Sprintf("tokens (limits: %d per minute, %d per day)", lim.TokensPerMinute, lim.TokensPerDay)
		case lim.TokensPerDay > 0:
			what = fmt.Sprintf("tokens per day (TPD): limit %d", lim.TokensPerDay)
		}
	}
	return &Error{
		Status:  http.StatusTooManyRequests,
		Code:    codeRateLimited,
		Type:    st.Exceeded,
		Message: fmt.Sprintf("Rate limit reached for key %s on %s. Please try again in %s.", who, what, resetString(st.RetryAfter)),
	}
}
