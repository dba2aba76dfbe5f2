package app_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/app"
	"github.com/switchboard-ai/switchboard/providers"
)

// serve --watch compares the file with what it held when the running
// config was read from it (Reloader.Sum): a change made while the gateway
// started, before the watch began, is reloaded.
func TestWatchSeesAChangeMadeBeforeItStarted(t *testing.T) {
	getenv := func(k string) string { return map[string]string{"FAKE_URL": "http://127.0.0.1:1"}[k] }
	cfg, err := graphs.Parse([]byte(yaml), providers.Builtin(getenv), getenv)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })

	path := filepath.Join(t.TempDir(), "switchboard.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	sum, err := app.ConfigSum(path) // as serve takes it, before it reads the file
	if err != nil {
		t.Fatal(err)
	}
	// The file changes before the watch starts.
	if err := os.WriteFile(path, []byte(yaml+"# changed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded := make(chan struct{}, 1)
	load := func() (*graphs.Set, error) {
		select {
		case loaded <- struct{}{}:
		default:
		}
		return nil, errors.New("the test's load")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.WatchConfig(ctx, app.Reloader{Load: load, Path: path, Interval: 10 * time.Millisecond, Sum: sum})
	select {
	case <-loaded:
	case <-time.After(10 * time.Second):
		t.Fatal("the change made before the watch started was not reloaded")
	}
}
