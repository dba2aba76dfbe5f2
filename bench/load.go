package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// sample is what one request measured: its latency and, for a stream, the
// time to its first content chunk and the mean gap between content chunks.
type sample struct {
	lat, ttft, gap time.Duration
}

// job makes request i (0-based, over the whole phase) on worker w.
type job func(ctx context.Context, w, i int) (sample, error)

// stats are a phase's samples, sorted.
type stats struct {
	n              int
	elapsed        time.Duration
	lat, ttft, gap []time.Duration
}

// pct returns the p-th percentile (0-100) of sorted d.
func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(float64(len(d)-1) * p / 100)
	return d[i]
}

func (s stats) rps() float64 { return float64(s.n) / s.elapsed.Seconds() }

// load makes n requests with conc workers, each request as soon as the
// worker's last one is answered (a closed loop), and fails on the first
// error.
func load(ctx context.Context, conc, n int, do job) (stats, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	samples := make([]sample, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				s, err := do(ctx, w, i)
				if err != nil {
					cancel(fmt.Errorf("request %d: %w", i, err))
					return
				}
				samples[i] = s
			}
		}()
	}
	wg.Wait()
	st := stats{n: n, elapsed: time.Since(start)}
	if err := context.Cause(ctx); err != nil {
		return st, err
	}
	for _, s := range samples {
		st.lat = append(st.lat, s.lat)
		if s.ttft > 0 {
			st.ttft = append(st.ttft, s.ttft)
			st.gap = append(st.gap, s.gap)
		}
	}
	slices.Sort(st.lat)
	slices.Sort(st.ttft)
	slices.Sort(st.gap)
	return st, nil
}

// client sends the load. Its pool is large enough that no request waits
// for a connection, at any concurrency measured.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 512,
		DisableCompression:  true,
		IdleConnTimeout:     time.Minute,
	}}
}

// post sends a JSON body and reads the whole answer.
func post(ctx context.Context, c *http.Client, url string, body []byte, header map[string]string) (sample, error) {
	start := time.Now()
	resp, err := send(ctx, c, url, body, header)
	if err != nil {
		return sample{}, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return sample{}, fmt.Errorf("read answer: %w", err)
	}
	return sample{lat: time.Since(start)}, nil
}

// postStream sends a streamed request and times its content chunks: the
// first one's arrival and the mean gap between them.
func postStream(ctx context.Context, c *http.Client, url string, body []byte) (sample, error) {
	start := time.Now()
	resp, err := send(ctx, c, url, body, nil)
	if err != nil {
		return sample{}, err
	}
	defer resp.Body.Close()
	r := bufio.NewReaderSize(resp.Body, 16<<10)
	var first, last time.Time
	chunks := 0
	for {
		line, err := r.ReadSlice('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			return sample{}, fmt.Errorf("read stream: %w", err)
		}
		if bytes.HasPrefix(line, []byte("data: ")) && bytes.Contains(line, []byte(`"content":"`)) {
			now := time.Now()
			if chunks == 0 {
				first = now
			}
			last = now
			chunks++
		}
	}
	if chunks < 2 {
		return sample{}, fmt.Errorf("stream had %d content chunks", chunks)
	}
	return sample{
		lat:  time.Since(start),
		ttft: first.Sub(start),
		gap:  last.Sub(first) / time.Duration(chunks-1),
	}, nil
}

func send(ctx context.Context, c *http.Client, url string, body []byte, header map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return resp, nil
}
