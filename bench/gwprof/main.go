// Command gwprof is the gateway as `switchboard serve --config FILE` wires
// it (internal/app), with net/http/pprof served beside its routes under
// /debug/pprof/. It exists for the long-streams benchmark's profiles
// (go run ./bench -streams -profile DIR) and is never shipped: the gateway
// itself serves no pprof.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	goruntime "runtime"
	"strings"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/app"
	"github.com/switchboard-ai/switchboard/internal/gctune"
	"github.com/switchboard-ai/switchboard/internal/listen"
	"github.com/switchboard-ai/switchboard/providers"
)

func main() {
	// Finer heap samples than the default one per 512 KB: what an open
	// stream holds is a few kilobytes in many objects.
	goruntime.MemProfileRate = 4096
	// The same arguments as the benchmark gives the gateway: serve
	// --config FILE --listen ADDR.
	fs := flag.NewFlagSet("gwprof", flag.ExitOnError)
	config := fs.String("config", "", "config file")
	addr := fs.String("listen", "127.0.0.1:0", "listen address")
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "serve" {
		args = args[1:]
	}
	_ = fs.Parse(args)
	defer gctune.Auto(os.Getenv)() // as serve does
	if err := run(*config, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "gwprof:", err)
		os.Exit(1)
	}
}

func run(config, addr string) error {
	cfg, err := graphs.LoadFile(config, providers.Builtin(os.Getenv), os.Getenv)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.Close(context.WithoutCancel(ctx))
	gw := a.Handler()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/debug/pprof/profile":
			pprof.Profile(w, r)
		case strings.HasPrefix(r.URL.Path, "/debug/pprof/"):
			pprof.Index(w, r)
		default:
			gw.ServeHTTP(w, r)
		}
	})
	// The sockets `switchboard serve` listens on, each with its own
	// accept loop: how new connections reach the scheduler is part of
	// what a profile of the ramp shows.
	lns, err := listen.Listen(addr, listen.Sockets())
	if err != nil {
		return err
	}
	// As `switchboard serve` does: the harness reads the address here.
	log.Info("switchboard listening", "addr", lns[0].Addr().String())
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	errs := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { errs <- srv.Serve(ln) }()
	}
	for range lns {
		if err := <-errs; err != http.ErrServerClosed {
			_ = srv.Close()
			return err
		}
	}
	return nil
}
