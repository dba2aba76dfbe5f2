// Package ratelimit holds the arithmetic of Switchboard's per-key rate
// limits (CONTRACT §13), shared by the store backends that keep the counts
// (cache: in process, or in Redis for every gateway on it) and the gateway
// that answers with them.
//
// Each limit is a token bucket: it holds up to the limit, refills
// continuously at limit per period, and is never reset on a clock minute,
// so a window is always the last minute (or day), whenever it is read. A
// request takes one from the requests bucket. Tokens are known only once a
// run is over: the run's usage is then taken from the token buckets, which
// may go below zero; a request is refused while a token bucket is empty,
// that is while the tokens already used in the window have reached the
// limit. A refused request takes nothing.
package ratelimit

import (
	"math"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
)

// The buckets of one principal, in the order Buckets holds them.
const (
	Requests = iota
	TokensMinute
	TokensDay
	NumBuckets
)

// Periods are how long an empty bucket of each kind takes to fill, in
// milliseconds.
var Periods = [NumBuckets]int64{Requests: 60_000, TokensMinute: 60_000, TokensDay: 86_400_000}

// Caps returns each bucket's capacity under l; 0 is unlimited.
func Caps(l graphs.Limits) [NumBuckets]int64 {
	return [NumBuckets]int64{Requests: l.RequestsPerMinute, TokensMinute: l.TokensPerMinute, TokensDay: l.TokensPerDay}
}

// Bucket is one bucket's stored state.
type Bucket struct {
	Level float64 // what it holds at At; negative after a run that overspent
	At    int64   // unix milliseconds; 0 is a bucket never used (full)
}

// Buckets are a principal's buckets.
type Buckets [NumBuckets]Bucket

// refill returns the level of b at now for a bucket of capacity c.
func refill(b Bucket, c, period, now int64) float64 {
	if b.At == 0 {
		return float64(c)
	}
	elapsed := max(now-b.At, 0)
	return math.Min(float64(c), b.Level+float64(elapsed)*float64(c)/float64(period))
}

// Admit refills bs at now and takes one request when every limited bucket
// allows it: the requests bucket holds at least one, each token bucket
// more than zero. It returns the levels after the decision and whether the
// request was admitted; bs is updated either way.
func Admit(bs *Buckets, l graphs.Limits, now int64) (levels [NumBuckets]float64, ok bool) {
	caps := Caps(l)
	ok = true
	for i, c := range caps {
		if c <= 0 {
			continue
		}
		levels[i] = refill(bs[i], c, Periods[i], now)
		if i == Requests && levels[i] < 1 || i != Requests && levels[i] <= 0 {
			ok = false
		}
	}
	if ok && caps[Requests] > 0 {
		levels[Requests]--
	}
	for i, c := range caps {
		if c > 0 {
			bs[i] = Bucket{Level: levels[i], At: now}
		}
	}
	return levels, ok
}

// Charge refills bs at now and takes tokens from its token buckets.
func Charge(bs *Buckets, l graphs.Limits, tokens, now int64) {
	caps := Caps(l)
	for _, i := range []int{TokensMinute, TokensDay} {
		if caps[i] > 0 {
			bs[i] = Bucket{Level: refill(bs[i], caps[i], Periods[i], now) - float64(tokens), At: now}
		}
	}
}

// Window is one limit as OpenAI's x-ratelimit-* headers describe it.
type Window struct {
	Limit     int64         // 0: not limited
	Remaining int64         // whole units left now
	Reset     time.Duration // until the bucket is full again
}

// State is the outcome of an Admit, as the gateway reports it.
type State struct {
	Allowed bool
	// Requests is the requests limit; Tokens the tokens per minute limit,
	// or the tokens per day limit when there is no per-minute one.
	Requests, Tokens Window
	// Exceeded is "requests" or "tokens" for a refused request.
	Exceeded string
	// RetryAfter is when a refused request may succeed.
	RetryAfter time.Duration
}

// StateOf describes the levels Admit returned.
func StateOf(l graphs.Limits, levels [NumBuckets]float64, ok bool) State {
	caps := Caps(l)
	s := State{Allowed: ok}
	window := func(i int) Window {
		return Window{
			Limit:     caps[i],
			Remaining: int64(math.Max(0, math.Floor(levels[i]))),
			Reset:     untilLevel(float64(caps[i]), levels[i], caps[i], Periods[i]),
		}
	}
	if caps[Requests] > 0 {
		s.Requests = window(Requests)
	}
	switch {
	case caps[TokensMinute] > 0:
		s.Tokens = window(TokensMinute)
	case caps[TokensDay] > 0:
		s.Tokens = window(TokensDay)
	}
	if ok {
		return s
	}
	for i, c := range caps {
		if c <= 0 {
			continue
		}
		// The requests bucket must reach one; a token bucket must hold
		// at least one token.
		if need := 1.0; levels[i] < need {
			if wait := untilLevel(need, levels[i], c, Periods[i]); wait > s.RetryAfter {
				s.RetryAfter = wait
				s.Exceeded = "tokens"
				if i == Requests {
					s.Exceeded = "requests"
				}
			}
		}
	}
	return s
}

// untilLevel is how long a bucket at level takes to reach target.
func untilLevel(target, level float64, c, period int64) time.Duration {
	if level >= target {
		return 0
	}
	ms := (target - level) * float64(period) / float64(c)
	return time.Duration(math.Ceil(ms)) * time.Millisecond
}
