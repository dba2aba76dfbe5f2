// Command tracesvg draws a trace stored in Jaeger as an SVG waterfall: one
// row per span, indented by depth, with its bar on a shared time axis,
// its duration, its service and operation, and Switchboard's key
// attributes (agent, handoff outcome, model, tokens). Handoff spans are
// highlighted and spans that ended in error are red.
//
// Usage:
//
//	tracesvg [-o out.svg] [-width 1200] [-title TEXT] SOURCE
//
// SOURCE is a file holding the JSON of Jaeger's /api/traces/<id>, "-" for
// standard input, an http(s) URL of that endpoint, or a bare trace id,
// fetched from the Jaeger query API at -jaeger (default
// http://127.0.0.1:16686, the one scripts/jaeger.sh starts).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "tracesvg:", err)
		os.Exit(1)
	}
}

var traceIDPattern = regexp.MustCompile(`^[0-9a-fA-F]{1,32}$`)

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("tracesvg", flag.ContinueOnError)
	out := fs.String("o", "", "write the SVG to this file (default: standard output)")
	width := fs.Int("width", 1200, "width of the picture in pixels")
	title := fs.String("title", "", "title above the waterfall (default: the trace id)")
	jaeger := fs.String("jaeger", "http://127.0.0.1:16686", "Jaeger query base URL, for a SOURCE that is a trace id")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("want one SOURCE (a file, -, a URL or a trace id), got %d arguments", fs.NArg())
	}
	src := fs.Arg(0)

	in, err := open(src, *jaeger, stdin)
	if err != nil {
		return err
	}
	defer in.Close()
	t, err := decodeTrace(in)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}

	w := stdout
	var f *os.File
	if *out != "" {
		if f, err = os.Create(*out); err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	if err := render(bw, t, *width, *title); err != nil {
		return fmt.Errorf("write svg: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write svg: %w", err)
	}
	if f != nil {
		return f.Close()
	}
	return nil
}

// open returns the JSON source: standard input, a URL, a trace id looked
// up in Jaeger, or a file. A file by the name wins over a trace id.
func open(src, jaeger string, stdin io.Reader) (io.ReadCloser, error) {
	switch {
	case src == "-":
		return io.NopCloser(stdin), nil
	case strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://"):
		return fetch(src)
	}
	f, err := os.Open(src)
	if err == nil {
		return f, nil
	}
	if os.IsNotExist(err) && traceIDPattern.MatchString(src) {
		return fetch(strings.TrimRight(jaeger, "/") + "/api/traces/" + src)
	}
	return nil, err
}

func fetch(url string) (io.ReadCloser, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}, nil
}

// cancelOnClose ends the request's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	defer c.cancel()
	return c.ReadCloser.Close()
}
