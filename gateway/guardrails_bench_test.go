package gateway_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// BenchmarkGuardedRequest compares a request with an input guardrail whose
// judge takes as long as the model with one without: the judge runs
// alongside the model call, so the two should cost about the same (the
// issue's bound is 10%), not the sum.
//
//	go test ./gateway/ -run '^$' -bench GuardedRequest -benchtime 20x
func BenchmarkGuardedRequest(b *testing.B) {
	const latency = 50 * time.Millisecond
	for _, tc := range []struct{ name, graphIn string }{{"unguarded", ""}, {"guarded", "policy"}} {
		b.Run(tc.name, func(b *testing.B) {
			fake := fakeupstream.New(b)
			fake.SetFallback(func(fakeupstream.Request) fakeupstream.Reply {
				return fakeupstream.Reply{Text: "hello", Delay: latency}
			})
			judge := newJudge(b, func(judgePayload) (int, string) {
				time.Sleep(latency)
				return http.StatusOK, `{"tripwire": false}`
			})
			yaml := fmt.Sprintf(guardYAML, "", "", tc.graphIn, "")
			// No tool is called: the tools URL only has to be valid.
			gw := gwtest.Start(b, yaml, map[string]string{"FAKE_URL": fake.URL, "TOOLS_URL": "http://127.0.0.1:9", "JUDGE_URL": judge.URL})
			body := gwtest.User("support", "hi")
			for b.Loop() {
				if r := gw.Chat(body, nil); r.Status != http.StatusOK {
					b.Fatalf("status %d: %s", r.Status, r.Body)
				}
			}
		})
	}
}
