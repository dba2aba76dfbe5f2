package gateway

import (
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/ratelimit"
)

// A 429's message names the limits the key has, and no other.
func TestRateLimitMessageNamesTheKeysLimits(t *testing.T) {
	for _, tc := range []struct {
		lim  graphs.Limits
		want string
	}{
		{graphs.Limits{TokensPerDay: 1000}, "on tokens per day (TPD): limit 1000."},
		{graphs.Limits{TokensPerMinute: 50}, "on tokens per minute (TPM): limit 50."},
		{graphs.Limits{TokensPerMinute: 50, TokensPerDay: 1000}, "on tokens (limits: 50 per minute, 1000 per day)."},
	} {
		e := rateLimitError("gamma", tc.lim, ratelimit.State{Exceeded: "tokens"})
		if !strings.Contains(e.Message, tc.want) || strings.Contains(e.Message, " 0 per") {
			t.Errorf("%+v: %q, want it to say %q", tc.lim, e.Message, tc.want)
		}
	}
}
