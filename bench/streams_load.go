package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The long-streams benchmark's load: N streams opened over a ramp, each
// read to its end, timed chunk by chunk.

// gauge counts the streams open (from their first content chunk to their
// end), the most open at once, and the streams in flight (from their
// request to their end), which hold the target's goroutines whether or not
// their first chunk came.
type gauge struct{ now, max, inflight atomic.Int64 }

func (g *gauge) add(d int64) {
	if g == nil {
		return
	}
	v := g.now.Add(d)
	for {
		m := g.max.Load()
		if v <= m || g.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// held is what the streams of one phase saw.
type held struct {
	dropped int
	errs    []string // a few distinct reasons for drops
	gaps    []time.Duration
	firsts  []time.Duration
	// timeline is every gap with when it ended, in no order: kept only
	// when holdStreams is asked for it.
	timeline []gapAt
}

// gapAt is a gap between two content chunks of a stream, and when it ended
// from the first stream's request.
type gapAt struct{ at, gap time.Duration }

// holdStreams opens n streams, stream i at ramp*i/n, and waits for all of
// them to end; with timeline, it keeps when each gap ended too.
func holdStreams(ctx context.Context, c *http.Client, url string, body []byte, header func(int) map[string]string,
	n int, ramp time.Duration, chunks int, open *gauge, timeline bool) held {
	type one struct {
		err   error
		first time.Duration
		gaps  []time.Duration
		ends  []time.Time
	}
	results := make([]one, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		if d := time.Until(t0.Add(ramp * time.Duration(i) / time.Duration(n))); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := openStream(ctx, c, url, body, header(i), chunks, open, timeline)
			results[i] = one{err: err, first: st.first, gaps: st.gaps, ends: st.ends}
		}()
	}
	wg.Wait()
	var h held
	for _, r := range results {
		if r.err != nil {
			h.dropped++
			if msg := r.err.Error(); len(h.errs) < 3 && !slices.Contains(h.errs, msg) {
				h.errs = append(h.errs, msg)
			}
			continue
		}
		h.firsts = append(h.firsts, r.first)
		h.gaps = append(h.gaps, r.gaps...)
		for k, end := range r.ends {
			h.timeline = append(h.timeline, gapAt{at: end.Sub(t0), gap: r.gaps[k]})
		}
	}
	slices.Sort(h.gaps)
	slices.Sort(h.firsts)
	return h
}

// streamTimes are one stream's first content chunk, from the request, and
// the gaps between its content chunks (and, when asked, when each ended).
type streamTimes struct {
	first time.Duration
	gaps  []time.Duration
	ends  []time.Time
}

var contentMark = []byte(`"content":"`)

// openStream sends one streamed request and reads it to [DONE]; a stream
// with other than chunks content chunks, or without [DONE], failed. open
// (nil: none) counts it from its first content chunk to its end, and in
// flight from its request. With ends, it keeps when each gap ended.
func openStream(ctx context.Context, c *http.Client, url string, body []byte, header map[string]string, chunks int, open *gauge, ends bool) (streamTimes, error) {
	if open != nil {
		open.inflight.Add(1)
		defer open.inflight.Add(-1)
	}
	start := time.Now()
	resp, err := send(ctx, c, url, body, header)
	if err != nil {
		return streamTimes{}, err
	}
	defer resp.Body.Close()
	st := streamTimes{gaps: make([]time.Duration, 0, chunks-1)}
	if ends {
		st.ends = make([]time.Time, 0, chunks-1)
	}
	r := bufio.NewReader(resp.Body)
	var last time.Time
	n, done := 0, false
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return streamTimes{}, fmt.Errorf("read stream: %w", err)
		}
		if bytes.HasPrefix(line, []byte("data: [DONE]")) {
			done = true
			continue
		}
		if bytes.HasPrefix(line, []byte("data: ")) && bytes.Contains(line, contentMark) {
			now := time.Now()
			if n == 0 {
				st.first = now.Sub(start)
				open.add(1)
				defer open.add(-1)
			} else {
				st.gaps = append(st.gaps, now.Sub(last))
				if ends {
					st.ends = append(st.ends, now)
				}
			}
			last = now
			n++
		}
	}
	if n != chunks || !done {
		return streamTimes{}, fmt.Errorf("stream had %d of %d content chunks, [DONE] %v", n, chunks, done)
	}
	return st, nil
}
