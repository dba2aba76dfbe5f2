package app

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
)

// Reloader says when the config is read again and how.
type Reloader struct {
	// Load reads and validates the config, as serve did at start.
	Load func() (*graphs.Set, error)
	// Signals triggers a reload on every value received (SIGHUP); nil:
	// none.
	Signals <-chan os.Signal
	// Path, when set, is polled every Interval and a change of its
	// content triggers a reload (serve --watch).
	Path string
	// Interval is the polling period; default 1s.
	Interval time.Duration
	// Sum is Path's checksum (ConfigSum) taken before the running config
	// was read from it, so that a change made while the gateway started
	// is seen; zero: the watch takes it when it starts.
	Sum [sha256.Size]byte
}

// ConfigSum is the checksum serve --watch compares: the file's content.
func ConfigSum(path string) ([sha256.Size]byte, error) { return fileSum(path) }

// defaultWatchInterval is how often serve --watch reads the config file.
const defaultWatchInterval = time.Second

// WatchConfig reloads the config as r says until ctx is done. Every reload
// is logged and counted in switchboard_config_reloads_total; a config that
// does not load leaves the running one in place, and each of its problems
// is logged as serve prints it at start.
//
// The file is polled, not watched with inotify: polling sees a Kubernetes
// ConfigMap update (a symlink swapped in a parent directory), an editor's
// rename-on-save and a network file system alike, and reading a config
// file once a second costs nothing. Only a change of content reloads.
func (a *App) WatchConfig(ctx context.Context, r Reloader) {
	interval := r.Interval
	if interval <= 0 {
		interval = defaultWatchInterval
	}
	var tick <-chan time.Time
	var last [sha256.Size]byte
	var readErr string
	if r.Path != "" {
		if last = r.Sum; last == ([sha256.Size]byte{}) {
			last, _ = fileSum(r.Path)
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-r.Signals:
			if !ok {
				r.Signals = nil
				continue
			}
			a.reloadFrom(r.Load, "signal")
			if r.Path != "" {
				last, _ = fileSum(r.Path)
			}
		case <-tick:
			sum, err := fileSum(r.Path)
			if err != nil {
				// A file mid-replacement may be missing for a moment: keep
				// serving, and say so once.
				if err.Error() != readErr {
					readErr = err.Error()
					a.log.Warn("config watch: cannot read the config file", "path", r.Path, "err", err)
				}
				continue
			}
			readErr = ""
			if sum == last {
				continue
			}
			last = sum
			a.reloadFrom(r.Load, "file change")
		}
	}
}

// reloadFrom loads the config and serves it, or logs why it cannot.
func (a *App) reloadFrom(load func() (*graphs.Set, error), trigger string) {
	cfg, err := load()
	if err == nil {
		err = a.Reload(cfg)
		if errors.Is(err, errDraining) {
			a.log.Info("config reload skipped: the gateway is shutting down", "trigger", trigger)
			return
		}
	}
	if err != nil {
		problems := problemsOf(err)
		for _, p := range problems {
			a.log.Error(p, "trigger", trigger)
		}
		a.log.Error("config reload failed; the running config stays", "trigger", trigger, "problems", len(problems))
		a.gens.reloads.Count(false)
		return
	}
	a.log.Info("config reloaded", "trigger", trigger, "graphs", cfg.GraphNames)
	a.gens.reloads.Count(true)
}

// fileSum returns the SHA-256 of the file at path.
func fileSum(path string) ([sha256.Size]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(b), nil
}
