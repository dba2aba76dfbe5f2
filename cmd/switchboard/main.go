// Command switchboard is the Switchboard gateway: `serve` runs it,
// `validate` checks a config, `graph` draws a graph's handoffs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/switchboard-ai/switchboard/cache"
	"github.com/switchboard-ai/switchboard/examples"
	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/internal/app"
	"github.com/switchboard-ai/switchboard/internal/gctune"
	"github.com/switchboard-ai/switchboard/internal/listen"
	"github.com/switchboard-ai/switchboard/internal/redact"
	"github.com/switchboard-ai/switchboard/providers"
)

const usage = `usage:
  switchboard serve    [--config FILE] [--listen ADDR] [--watch]
                                                         run the gateway (no --config: the built-in offline demo);
                                                         SIGHUP reloads the config, --watch also on a change of the file
  switchboard validate [--config FILE]                   check a config and print its graphs
  switchboard graph    [--config FILE] [--model NAME] [--format mermaid|dot]
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("switchboard "+args[0], flag.ContinueOnError)
	var reloader app.Reloader
	fs.SetOutput(stderr)
	config := fs.String("config", "", "config file (default: the built-in offline demo)")
	var listen, modelName, format *string
	watch := new(bool)
	switch args[0] {
	case "serve":
		listen = fs.String("listen", "", "listen address (overrides server.listen and SWITCHBOARD_LISTEN)")
		watch = fs.Bool("watch", false, "reload the config when the file changes (SIGHUP always reloads)")
	case "validate":
	case "graph":
		modelName = fs.String("model", "", "graph to draw (default: the first)")
		format = fs.String("format", "mermaid", "mermaid or dot")
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "unknown command %q\n%s", args[0], usage)
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		// Flags only: a stray word (a config path without --config) would
		// otherwise be ignored and the demo checked or served instead.
		fmt.Fprintf(stderr, "unexpected argument %q\n%s", fs.Arg(0), usage)
		return 2
	}
	if args[0] == "serve" {
		// Before anything slow: SIGHUP's default action ends the process.
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		reloader = app.Reloader{Load: func() (*graphs.Set, error) { return loadServe(*config, *listen) }, Signals: hup}
		if *watch && *config != "" {
			// The sum before the read: a change made while the gateway
			// starts (after the read, before the watch) is not missed.
			reloader.Path = *config
			reloader.Sum, _ = app.ConfigSum(*config)
		}
	}
	cfg, err := load(*config)
	if err != nil {
		var ce *graphs.ConfigError
		if !errors.As(err, &ce) {
			// A file that cannot be read is a config that is not valid.
			err = fmt.Errorf("config invalid: %w", err)
		}
		fmt.Fprintln(stderr, err)
		return 1
	}
	switch args[0] {
	case "validate":
		graphs.Describe(stdout, cfg)
		fmt.Fprintln(stdout, "config valid")
		return 0
	case "graph":
		name := *modelName
		if name == "" {
			// One diagram per run (mermaid holds one graph): the first by
			// name, and a note of the others on stderr.
			name = cfg.GraphNames[0]
			if len(cfg.GraphNames) > 1 {
				fmt.Fprintf(stderr, "%d graphs (%s); drawing %q: choose with --model NAME\n",
					len(cfg.GraphNames), strings.Join(cfg.GraphNames, ", "), name)
			}
		}
		g, ok := cfg.Graphs[name]
		if !ok {
			fmt.Fprintf(stderr, "no graph named %q\n", name)
			return 1
		}
		if err := graphs.Diagram(stdout, g, *format); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	if *listen != "" {
		cfg.Server.Listen = *listen
	}
	return serve(cfg, reloader, stderr)
}

// loadServe is load with serve's --listen applied, as a reload reads it.
func loadServe(path, listen string) (*graphs.Set, error) {
	cfg, err := load(path)
	if err == nil && listen != "" {
		cfg.Server.Listen = listen
	}
	return cfg, err
}

// load reads the config file, or the built-in demo when there is none.
// The store's URL (the file's, or SWITCHBOARD_STORE_URL) is checked here,
// without connecting: graphs is a leaf and does not know the stores'
// URLs, and a bad one must fail validate and a reload as the rest does.
func load(path string) (*graphs.Set, error) {
	builtin := providers.Builtin(os.Getenv)
	var cfg *graphs.Set
	var err error
	if path == "" {
		cfg, err = graphs.Parse(examples.Demo, builtin, os.Getenv)
	} else {
		cfg, err = graphs.LoadFile(path, builtin, os.Getenv)
	}
	if err != nil {
		// The store's URL is checked with the rest: all the problems of a
		// config are reported together (CONTRACT §2).
		if ce := (*graphs.ConfigError)(nil); errors.As(err, &ce) {
			if line := storeProblem(ce.StoreURL); line != "" {
				ce.Problems = append(ce.Problems, line)
			}
		}
		return nil, masked(err)
	}
	if line := storeProblem(cfg.Store.URL); line != "" {
		return nil, masked(&graphs.ConfigError{Problems: []string{line}})
	}
	return cfg, nil
}

// storeProblem is the config problem of a store URL, or "".
func storeProblem(url string) string {
	if err := cache.CheckURL(url); err != nil {
		return "config invalid: store.url: " + err.Error()
	}
	return ""
}

// masked returns a config error with the credentials its lines quote
// masked: a problem may quote a URL as written, with its password or a
// secret query parameter, and the lines go to stderr and, on a reload,
// to the log (CONTRACT §14).
func masked(err error) error {
	var ce *graphs.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	out := &graphs.ConfigError{Problems: make([]string, len(ce.Problems))}
	for i, p := range ce.Problems {
		out.Problems[i] = redact.Secrets(p)
	}
	return out
}

func serve(cfg *graphs.Set, reloader app.Reloader, stderr io.Writer) int {
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	// Collect less often while the heap grows with what open streams hold,
	// unless the operator set GOGC (internal/gctune).
	defer gctune.Auto(os.Getenv)()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	lns, err := listen.Listen(cfg.Server.Listen, listen.Sockets())
	if err != nil {
		log.Error("cannot listen", "addr", cfg.Server.Listen, "err", err)
		_ = a.Close(ctx)
		return 1
	}
	go a.WatchConfig(ctx, reloader)
	if err := a.Serve(ctx, lns...); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("stopped with an error", "err", err)
		return 1
	}
	return 0
}
