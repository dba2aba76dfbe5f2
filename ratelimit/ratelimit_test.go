package ratelimit

import (
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
)

// A requests bucket admits its limit at once, then one more request per
// period/limit: a sliding window, with no reset on a clock minute.
func TestRequestsRefillContinuously(t *testing.T) {
	l := graphs.Limits{RequestsPerMinute: 3}
	var bs Buckets
	now := int64(1_000_000)
	for i := range 3 {
		levels, ok := Admit(&bs, l, now)
		st := StateOf(l, levels, ok)
		if !ok || st.Requests.Remaining != int64(2-i) {
			t.Fatalf("request %d: ok %v, state %+v", i, ok, st)
		}
	}
	levels, ok := Admit(&bs, l, now)
	st := StateOf(l, levels, ok)
	if ok || st.Exceeded != "requests" || st.RetryAfter != 20*time.Second || st.Requests.Remaining != 0 || st.Requests.Reset != time.Minute {
		t.Fatalf("the fourth request: ok %v, state %+v; want refused, retry after 20s, reset 1m", ok, st)
	}
	// 19.999 s later one request has not yet come back; at 20 s it has.
	if _, ok := Admit(&bs, l, now+19_999); ok {
		t.Error("admitted before a request came back")
	}
	if _, ok := Admit(&bs, l, now+20_000); !ok {
		t.Error("refused once a request came back")
	}
	// A full minute later the bucket is full, not over.
	levels, _ = Admit(&bs, l, now+200_000)
	if st := StateOf(l, levels, true); st.Requests.Remaining != 2 {
		t.Errorf("after a long pause: %+v, want 2 left after this request", st.Requests)
	}
}

// Tokens are charged after the run: the run that crosses the limit is not
// cut, the next request is refused until the used tokens have drained
// below the limit.
func TestTokensChargedAfterTheRun(t *testing.T) {
	l := graphs.Limits{TokensPerMinute: 100, TokensPerDay: 1000}
	var bs Buckets
	now := int64(5_000_000)
	if _, ok := Admit(&bs, l, now); !ok {
		t.Fatal("a fresh key is refused")
	}
	Charge(&bs, l, 130, now)
	levels, ok := Admit(&bs, l, now)
	st := StateOf(l, levels, ok)
	// 31 tokens must come back at 100/min: 18.6 s.
	if ok || st.Exceeded != "tokens" || st.RetryAfter != 18600*time.Millisecond || st.Tokens.Limit != 100 || st.Tokens.Remaining != 0 {
		t.Fatalf("after overspending: ok %v, state %+v", ok, st)
	}
	if _, ok := Admit(&bs, l, now+18_600); !ok {
		t.Error("refused once the minute's tokens drained")
	}
	// The day's bucket still remembers: 9 more such runs exhaust it.
	for range 9 {
		Charge(&bs, l, 100, now+60_000)
	}
	levels, ok = Admit(&bs, l, now+120_000)
	if st := StateOf(l, levels, ok); ok || st.Exceeded != "tokens" || st.RetryAfter < time.Minute {
		t.Errorf("over the day's tokens: ok %v, state %+v", ok, st)
	}
}

// Keys without a limit of a kind get no window of that kind.
func TestStateOnlyForSetLimits(t *testing.T) {
	l := graphs.Limits{TokensPerDay: 10}
	var bs Buckets
	levels, ok := Admit(&bs, l, 1)
	st := StateOf(l, levels, ok)
	if !ok || st.Requests.Limit != 0 || st.Tokens.Limit != 10 || st.Tokens.Remaining != 10 || st.Tokens.Reset != 0 {
		t.Errorf("state %+v", st)
	}
}
