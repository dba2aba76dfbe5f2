package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/app"
	"github.com/switchboard-ai/switchboard/providers"
)

// These benchmarks run the gateway in this process, wired as `switchboard
// serve` wires it, in front of the fast fake upstream, so that the hot
// paths can be profiled:
//
//	go test ./bench -run '^$' -bench Gateway -cpuprofile cpu.out
//	go tool pprof -top -focus 'switchboard/(gateway|runtime|providers|cache)' cpu.out

// startInProcess serves the benchmark config with store storeURL.
func startInProcess(b testing.TB, storeURL string) string {
	b.Helper()
	up, err := startUpstream(time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(up.close)
	yaml := fmt.Sprintf(gatewayConfig, storeURL, up.url(), up.chargesURL())
	cfg, err := graphs.Parse([]byte(yaml), providers.Builtin(func(string) string { return "" }), func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	b.Cleanup(func() { srv.Close(); _ = a.Close(context.Background()) })
	return srv.URL + "/v1/chat/completions"
}

func benchJob(b *testing.B, do job) {
	b.Helper()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := do(b.Context(), 0, i); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkGatewayPlain(b *testing.B) {
	url := startInProcess(b, "memory://")
	benchJob(b, plainJob(newClient(), url, plainBody))
}

func BenchmarkGatewayStream(b *testing.B) {
	url := startInProcess(b, "memory://")
	benchJob(b, streamJob(newClient(), url, streamBody))
}

func BenchmarkGatewayHandoff(b *testing.B) {
	url := startInProcess(b, "memory://")
	benchJob(b, plainJob(newClient(), url, handoffBody))
}

// BenchmarkGatewaySession runs turn `turns`+1 of sessions that hold
// `turns` turns already. Each session is used for at most 25 measured turns
// and then replaced by a fresh one (its setup turns not timed), so that the
// session length stays about `turns`, however long the benchmark runs.
func BenchmarkGatewaySession(b *testing.B) {
	const measured = 25
	for _, store := range []string{"memory://", "redis://127.0.0.1:6379/0"} {
		for _, turns := range []int{1, 200} {
			b.Run(fmt.Sprintf("store=%s/turn=%d", store[:5], turns+1), func(b *testing.B) {
				if store != "memory://" && !redisUp("127.0.0.1:6379") {
					b.Skip("no Redis")
				}
				url := startInProcess(b, store)
				c := newClient()
				prefix := "bench-inproc-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
				var ids []string
				b.Cleanup(func() {
					// Redis keeps what the benchmark wrote unless it is deleted.
					for _, id := range ids {
						req, _ := http.NewRequest(http.MethodDelete, strings.TrimSuffix(url, "/chat/completions")+"/sessions/"+id, nil)
						if resp, err := c.Do(req); err == nil {
							resp.Body.Close()
						}
					}
				})
				turn := func(ctx context.Context, id string, t int) error {
					body := []byte(`{"model":"plain","messages":[{"role":"user","content":"Turn ` + strconv.Itoa(t) + `: hello there"}]}`)
					_, err := post(ctx, c, url, body, map[string]string{"X-Session-Id": id})
					return err
				}
				// fresh starts a session and makes its first `turns` turns.
				fresh := func() string {
					id := prefix + strconv.Itoa(len(ids))
					ids = append(ids, id)
					for t := 1; t <= turns; t++ {
						if err := turn(b.Context(), id, t); err != nil {
							b.Fatal(err)
						}
					}
					return id
				}
				cur, t := fresh(), turns
				b.ReportAllocs()
				for b.Loop() {
					if t == turns+measured {
						b.StopTimer()
						cur, t = fresh(), turns
						b.StartTimer()
					}
					t++
					if err := turn(b.Context(), cur, t); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
