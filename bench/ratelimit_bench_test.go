package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/app"
	"github.com/switchboard-ai/switchboard/providers"
)

// BenchmarkGatewayRateLimit is what a key's rate limits add to a whole
// stateless request, on each store: the same request with the same key,
// without limits and with all three (a requests check before the run, a
// token charge after it).
//
//	go test ./bench -run '^$' -bench GatewayRateLimit -benchmem
func BenchmarkGatewayRateLimit(b *testing.B) {
	for _, store := range []string{"memory://", "redis://127.0.0.1:6379/0"} {
		for _, limits := range []string{"", "{requests_per_minute: 1000000000, tokens_per_minute: 1000000000, tokens_per_day: 1000000000}"} {
			name := "limits=off"
			if limits != "" {
				name = "limits=on"
			}
			b.Run(fmt.Sprintf("store=%s/%s", store[:5], name), func(b *testing.B) {
				if store != "memory://" && !redisUp("127.0.0.1:6379") {
					b.Skip("no Redis")
				}
				url := startLimited(b, store, limits)
				c := newClient()
				auth := map[string]string{"Authorization": "Bearer bench-key"}
				benchJob(b, func(ctx context.Context, _, _ int) (sample, error) {
					return post(ctx, c, url, plainBody, auth)
				})
			})
		}
	}
}

// startLimited serves the benchmark config with one API key, whose limits
// are the YAML flow mapping limits (none when empty), on store.
func startLimited(b *testing.B, store, limits string) string {
	b.Helper()
	up, err := startUpstream(time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(up.close)
	key := "    - {name: bench-" + rand.Text()[:8] + ", key: bench-key}\n"
	if limits != "" {
		key = strings.Replace(key, "}", ", limits: "+limits+"}", 1)
	}
	yaml := strings.Replace(fmt.Sprintf(gatewayConfig, store, up.url(), up.chargesURL()), "server:\n", "server:\n  api_keys:\n"+key, 1)
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
