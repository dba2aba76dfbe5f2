package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// closedWithin reports whether the peer closed conn within d.
func closedWithin(conn net.Conn, d time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// parallel runs f(i) for i < n at once and waits.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); f(i) }()
	}
	wg.Wait()
}

func checkIdle(g *gateway) result {
	const n = 300
	var closed atomic.Int64
	parallel(n, func(int) {
		conn, err := net.Dial("tcp", g.addr)
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return
		}
		resp.Body.Close()
		if closedWithin(conn, 5*time.Second) {
			closed.Add(1)
		}
	})
	return result{"idle keep-alive connections closed", closed.Load() == n,
		fmt.Sprintf("%d of %d idle connections closed by the gateway (idle_timeout 1s)", closed.Load(), n)}
}

func checkSlowBody(g *gateway) result {
	const n = 100
	var closed atomic.Int64
	start := time.Now()
	parallel(n, func(int) {
		conn, err := net.Dial("tcp", g.addr)
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100000\r\n\r\n", apiKey)
		done := make(chan struct{})
		defer close(done)
		go func() {
			for {
				select {
				case <-done:
					return
				case <-time.After(300 * time.Millisecond):
				}
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		if closedWithin(conn, 6*time.Second) {
			closed.Add(1)
		}
	})
	return result{"slow request bodies cut", closed.Load() == n,
		fmt.Sprintf("%d of %d trickling bodies cut (read_timeout 1s), all in %.1fs", closed.Load(), n, time.Since(start).Seconds())}
}

func checkSilentStream(g *gateway, h *hostile) result {
	session := fmt.Sprintf("silent-%d", time.Now().UnixNano())
	d := net.Dialer{Control: nil}
	conn, err := d.Dial("tcp", g.addr)
	if err != nil {
		return result{"a silent stream client is dropped", false, err.Error()}
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	body := chat("flood", "stream to me", true)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nX-Session-Id: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		apiKey, session, len(body), body)
	// Never read. The gateway must give up on this client, cancel its run
	// and release the session.
	var r reply
	var took time.Duration
	start := time.Now()
	for time.Since(start) < 10*time.Second {
		time.Sleep(500 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r = g.post(ctx, chat("ok", "next turn", false), map[string]string{"X-Session-Id": session})
		cancel()
		if r.status == http.StatusOK {
			took = time.Since(start)
			break
		}
	}
	held := r.status == http.StatusOK && h.streamsOpen.Load() == 0
	return result{"a silent stream client is dropped", held,
		fmt.Sprintf("next turn %d after %.1fs (stream_write_timeout 1s); upstream streams still open: %d", r.status, took.Seconds(), h.streamsOpen.Load())}
}

func checkTrickle(g *gateway) result {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r := g.post(ctx, chat("trickle", "hi", true), nil)
	took := time.Since(start)
	held := r.err == nil && took < 10*time.Second && strings.Contains(r.body, "upstream_timeout")
	return result{"a streamed provider call has a deadline", held,
		fmt.Sprintf("a delta every 200ms forever: stream ended after %.1fs (timeout 3s) with upstream_timeout %v", took.Seconds(), strings.Contains(r.body, "upstream_timeout"))}
}

func checkHugeAnswers(g *gateway) result {
	before := g.rss()
	var peak atomic.Int64
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if r := g.rss(); r > peak.Load() {
				peak.Store(r)
			}
		}
	}()
	var tooLarge atomic.Int64
	parallel(6, func(i int) {
		graph, stream := "huge", false
		if i%2 == 1 {
			graph, stream = "longline", true
		}
		r := g.post(context.Background(), chat(graph, "hi", stream), nil)
		if strings.Contains(r.body, "response too large") {
			tooLarge.Add(1)
		}
	})
	close(stop)
	grew := max(peak.Load()-before, 0)
	return result{"upstream answers bounded", tooLarge.Load() == 6 && grew < 200<<20,
		fmt.Sprintf("3 answers of 100 MB and 3 SSE lines of 50 MB at once: %d refused as too large; RSS %d -> peak %d MB", tooLarge.Load(), before>>20, peak.Load()>>20)}
}

func checkSessionSize(g *gateway) result {
	session := map[string]string{"X-Session-Id": fmt.Sprintf("big-%d", time.Now().UnixNano())}
	big := strings.Repeat("0123456789", 30000) // 300 KB a turn, 1 MiB allowed
	var statuses []string
	refused := false
	for turn := 1; turn <= 6 && !refused; turn++ {
		r := g.post(context.Background(), chat("ok", big, false), session)
		statuses = append(statuses, fmt.Sprint(r.status))
		refused = r.status == http.StatusRequestEntityTooLarge && strings.Contains(r.body, "session_too_large")
	}
	return result{"session transcripts bounded", refused,
		fmt.Sprintf("turns of 300 KB, max_session_bytes 1 MiB: %s", strings.Join(statuses, " "))}
}

func checkFanout(g *gateway, h *hostile) result {
	r := g.post(context.Background(), chat("fanout", "use the tools", false), nil)
	calls, peak := h.toolCalls.Load(), h.toolPeak.Load()
	return result{"server tool fan-out bounded", r.status == http.StatusOK && calls <= 64 && peak <= 8,
		fmt.Sprintf("2,000 tool calls asked in one turn: %d run, at most %d at once; reply %d", calls, peak, r.status)}
}

func checkEchoes(g *gateway) result {
	var leaks []string
	for _, graph := range []string{"echo-auth", "echo-body"} {
		r := g.post(context.Background(), chat(graph, prompt, false), nil)
		if r.status != http.StatusBadGateway {
			leaks = append(leaks, fmt.Sprintf("%s answered %d", graph, r.status))
		}
		for _, s := range []string{"PROVIDERKEY0042", "SECRET-7731"} {
			if strings.Contains(r.body, s) {
				leaks = append(leaks, graph+" told the client "+s)
			}
		}
	}
	saw := "a 401 echoing Authorization and a 500 echoing the request: neither the key nor the prompt in the 502s"
	if len(leaks) > 0 {
		saw = strings.Join(leaks, "; ")
	}
	return result{"provider error text scrubbed (client)", len(leaks) == 0, saw}
}

func checkAddresses(g *gateway) result {
	r := g.post(context.Background(), chat("reset", "hi", false), nil)
	held := r.status == http.StatusBadGateway && !strings.Contains(r.body, "127.0.0.1") && !strings.Contains(r.body, "tcp")
	msg := r.body
	if i := strings.Index(msg, `"message":"`); i >= 0 {
		msg = msg[i+11:]
		if j := strings.Index(msg, `"`); j >= 0 {
			msg = msg[:j]
		}
	}
	return result{"no internal addresses in client errors", held, fmt.Sprintf("upstream reset: %d %q", r.status, msg)}
}

func checkSmall(g *gateway) result {
	var bad []string
	r := g.post(context.Background(), chat("ok", "hi", false), map[string]string{"Authorization": "bearer " + apiKey})
	if r.status != http.StatusOK {
		bad = append(bad, fmt.Sprintf("lowercase bearer %d", r.status))
	}
	req, _ := http.NewRequest(http.MethodPut, "http://"+g.addr+"/v1/chat/completions", nil)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		bad = append(bad, fmt.Sprintf("PUT %v %v", resp.StatusCode, err))
	} else {
		resp.Body.Close()
	}
	for _, params := range []string{`"max_tokens": 1e3`, `"temperature": 1e39`, `"top_p": 0.5e0`} {
		body := strings.Replace(chat("ok", "hi", false), `"stream":false`, `"stream":false,`+params, 1)
		if r := g.post(context.Background(), body, nil); r.status != http.StatusOK {
			bad = append(bad, fmt.Sprintf("%s %d", params, r.status))
		}
	}
	saw := "bearer in lowercase 200, PUT 405, max_tokens 1e3 / temperature 1e39 / top_p 0.5e0 accepted"
	if len(bad) > 0 {
		saw = strings.Join(bad, "; ")
	}
	return result{"small ones (auth scheme, 405, numbers)", len(bad) == 0, saw}
}

func checkDrain(g *gateway) result {
	open := make(chan reply, 1)
	go func() { open <- g.post(context.Background(), chat("slow", "hi", false), nil) }()
	time.Sleep(500 * time.Millisecond)
	g.sigterm()
	time.Sleep(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fresh := g.post(ctx, chat("ok", "hi", false), nil)
	first := <-open
	held := first.status == http.StatusOK && fresh.status == http.StatusServiceUnavailable && strings.Contains(fresh.body, "draining")
	done := make(chan error, 1)
	go func() { done <- g.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		held = false
	}
	return result{"new runs refused while draining", held,
		fmt.Sprintf("after SIGTERM: the open run %d, a new run %d %v", first.status, fresh.status, strings.Contains(fresh.body, "draining"))}
}

func checkLogs(g *gateway) result {
	log := g.log.String()
	var leaks []string
	for _, s := range []string{storePass, "PROVIDERKEY0042", "SECRET-7731"} {
		if strings.Contains(log, s) {
			leaks = append(leaks, s)
		}
	}
	saw := fmt.Sprintf("%d log lines: no store password, provider key or prompt", strings.Count(log, "\n"))
	if len(leaks) > 0 {
		saw = "the log holds " + strings.Join(leaks, ", ")
	}
	return result{"nothing secret in the log", len(leaks) == 0, saw}
}
