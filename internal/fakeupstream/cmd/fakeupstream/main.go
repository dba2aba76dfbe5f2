// Command fakeupstream runs the project's scripted fake OpenAI-compatible
// upstream as a process, so that tests written in other languages (the
// Node end-to-end suite in e2e/) can script it and read what it received:
//
//	fakeupstream --listen 127.0.0.1:0 --addr-file FILE
//
// It answers POST /v1/chat/completions from its script and serves a
// control API under /_control (see control.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("fakeupstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "listen address")
	addrFile := fs.String("addr-file", "", "file to write the actual listen address (host:port) to once listening")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "fakeupstream: listen: %v\n", err)
		return 1
	}
	up := newUpstream()
	defer up.Close()
	srv := &http.Server{Handler: up, ReadHeaderTimeout: 10 * time.Second}

	addr := ln.Addr().String()
	if *addrFile != "" {
		if err := writeAtomic(*addrFile, addr+"\n"); err != nil {
			fmt.Fprintf(stderr, "fakeupstream: %v\n", err)
			_ = ln.Close()
			return 1
		}
	}
	fmt.Fprintf(stderr, "fakeupstream: listening on http://%s\n", addr)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		fmt.Fprintf(stderr, "fakeupstream: serve: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	// Hanging replies only end when the fake closes, so close it first and
	// give the front server a short grace period.
	up.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "fakeupstream: shutdown: %v\n", err)
	}
	return 0
}

// writeAtomic writes content to path through a rename, so that a script
// polling for the file never reads it half-written.
func writeAtomic(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".addr-*")
	if err != nil {
		return fmt.Errorf("write addr file: %w", err)
	}
	if _, err := tmp.WriteString(content); err != nil {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write addr file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write addr file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write addr file: %w", err)
	}
	return nil
}
