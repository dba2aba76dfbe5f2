package ops_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

// deskConfig serves one desk agent on the fake upstream as each graph of
// names.
func deskConfig(fakeURL string, names ...string) string {
	var graphs strings.Builder
	for _, n := range names {
		fmt.Fprintf(&graphs, "  %s:\n    lead: desk\n    description: graph %s\n", n, n)
	}
	return fmt.Sprintf(`
server:
  drain_timeout: 5s
providers:
  fake:
    base_url: %s
    timeout: 20s
agents:
  desk:
    description: Answers everything
    instructions: You are the desk.
    model: fake/desk-model
graphs:
%s`, fakeURL, graphs.String())
}

const (
	reloadsOK     = `switchboard_config_reloads_total{result="ok"}`
	reloadsFailed = `switchboard_config_reloads_total{result="failed"}`
)

// SIGHUP reads the file again: a graph added to it is listed and served,
// and the reload is counted.
func TestSIGHUPAddsGraph(t *testing.T) {
	fake := fakeupstream.New(t)
	fake.SetFallback(fakeupstream.Echo)
	p := start(t, deskConfig(fake.URL, "desk"))
	if got := models(t, p.URL, ""); !slices.Equal(got, []string{"desk"}) {
		t.Fatalf("models at start: %v", got)
	}
	if got := metric(t, p.URL, reloadsOK); got != "0" {
		t.Errorf("%s at start = %q, want 0", reloadsOK, got)
	}

	p.write(deskConfig(fake.URL, "desk", "frontdesk"))
	p.hup()
	eventually(t, 10*time.Second, "frontdesk is listed", func() bool {
		return slices.Contains(models(t, p.URL, ""), "frontdesk")
	})
	if r := chat(context.Background(), t, p.URL, "", "frontdesk", "hello"); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"model":"frontdesk"`) {
		t.Errorf("chat with the new graph: %v", r)
	}
	// The reload is counted just after the new graphs serve.
	eventually(t, 10*time.Second, reloadsOK+" is 1", func() bool { return metric(t, p.URL, reloadsOK) == "1" })
	p.waitLog(t, `"msg":"config reloaded"`)
}

// A broken file changes nothing: the old graphs keep serving, every
// problem is logged as at start, and the failure is counted.
func TestBrokenReloadKeepsOldConfig(t *testing.T) {
	fake := fakeupstream.New(t)
	fake.SetFallback(fakeupstream.Echo)
	p := start(t, deskConfig(fake.URL, "desk"))

	broken := deskConfig(fake.URL, "desk") + "  other:\n    lead: nobody\n  third:\n    lead: ghost\n"
	p.write(broken)
	p.hup()
	eventually(t, 10*time.Second, "the failed reload is counted", func() bool {
		return metric(t, p.URL, reloadsFailed) == "1"
	})
	if got := models(t, p.URL, ""); !slices.Equal(got, []string{"desk"}) {
		t.Errorf("models after a broken reload: %v, want [desk]", got)
	}
	if r := chat(context.Background(), t, p.URL, "", "desk", "still there?"); r.Status != http.StatusOK {
		t.Errorf("chat after a broken reload: %v", r)
	}
	// The problems are logged as at start, each lead named.
	p.waitLog(t, "config invalid: ", "nobody", "ghost")
	if got := metric(t, p.URL, reloadsOK); got != "0" {
		t.Errorf("%s = %q, want 0", reloadsOK, got)
	}
}

// A run in flight when the config changes finishes on the graph it
// started with, even though the new config no longer has that graph;
// new requests see the new config at once.
func TestRunInFlightAcrossReload(t *testing.T) {
	fake := fakeupstream.New(t)
	const slow = "take your time"
	fake.SetFallback(func(r fakeupstream.Request) fakeupstream.Reply {
		last := r.Parsed.Messages[len(r.Parsed.Messages)-1].Text()
		if last == slow {
			return fakeupstream.Reply{Text: "done slowly", Delay: 2 * time.Second}
		}
		return fakeupstream.Reply{Text: last}
	})
	p := start(t, deskConfig(fake.URL, "desk"))

	ctx := context.Background()
	inflight := make(chan reply, 1)
	go func() { inflight <- chat(ctx, t, p.URL, "", "desk", slow) }()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := fake.WaitRequests(wctx, 1); err != nil {
		t.Fatalf("the slow run never called its model: %v", err)
	}

	p.write(deskConfig(fake.URL, "lobby"))
	p.hup()
	eventually(t, 10*time.Second, "lobby replaces desk", func() bool {
		return slices.Equal(models(t, p.URL, ""), []string{"lobby"})
	})
	if r := chat(ctx, t, p.URL, "", "desk", "hello"); r.Status != http.StatusNotFound || r.code() != "model_not_found" {
		t.Errorf("a new request for the removed graph: %v, want 404 model_not_found", r)
	}
	select {
	case r := <-inflight:
		t.Fatalf("the slow run ended before the reload was seen: %v", r)
	default:
	}
	r := <-inflight
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "done slowly") || !strings.Contains(string(r.Body), `"model":"desk"`) {
		t.Errorf("the run in flight across the reload: %v, want 200 from desk", r)
	}
}

// serve --watch reloads on a change of the file, with no signal.
func TestWatchReloadsOnChange(t *testing.T) {
	fake := fakeupstream.New(t)
	fake.SetFallback(fakeupstream.Echo)
	p := start(t, deskConfig(fake.URL, "desk"), "--watch")
	p.write(deskConfig(fake.URL, "desk", "annex"))
	eventually(t, 10*time.Second, "annex is listed", func() bool {
		return slices.Contains(models(t, p.URL, ""), "annex")
	})
	// A broken file is seen once, counted once, and changes nothing.
	p.write("graphs: [")
	eventually(t, 10*time.Second, "the broken file is counted", func() bool {
		return metric(t, p.URL, reloadsFailed) == "1"
	})
	if got := models(t, p.URL, ""); !slices.Equal(got, []string{"annex", "desk"}) {
		t.Errorf("models after a broken file: %v", got)
	}
}

// A setting that needs a restart is logged and left as it was.
func TestReloadKeepsRestartSettings(t *testing.T) {
	fake := fakeupstream.New(t)
	fake.SetFallback(fakeupstream.Echo)
	p := start(t, deskConfig(fake.URL, "desk"))
	p.write(strings.Replace(deskConfig(fake.URL, "desk", "annex"), "server:\n", "store:\n  url: redis://127.0.0.1:1/0\nserver:\n", 1))
	p.hup()
	eventually(t, 10*time.Second, "annex is listed", func() bool {
		return slices.Contains(models(t, p.URL, ""), "annex")
	})
	// The store change is logged as needing a restart.
	p.waitLog(t, `"setting":"store"`)
	if r := do(context.Background(), t, http.MethodGet, p.URL+"/readyz", "", nil); r.Status != http.StatusOK {
		t.Errorf("/readyz after the reload: %v (the memory store should still serve)", r)
	}
}
