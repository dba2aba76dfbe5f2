// Command revproxy is the benchmark's baseline: a plain net/http
// httputil.ReverseProxy that forwards every request to one upstream. It is
// the floor of what any Go HTTP proxy costs; the gateway is measured beside
// it. GET /metrics answers go_memstats_mallocs_total, go_goroutines and the
// heap's and stacks' bytes in use, in
// the same form as the gateway's, so that they are read the same way.
// With -pprof it also serves net/http/pprof (the long-streams benchmark's
// profiles).
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/http/pprof"
	"net/url"
	"os"
	"runtime"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "listen address")
	target := flag.String("upstream", "", "upstream base URL (scheme://host:port)")
	withPprof := flag.Bool("pprof", false, "serve /debug/pprof/")
	flag.Parse()
	u, err := url.Parse(*target)
	if err != nil || u.Host == "" {
		fmt.Fprintf(os.Stderr, "revproxy: bad -upstream %q\n", *target)
		os.Exit(2)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	// The same pooling as the gateway's provider transport, so that both
	// keep their upstream connections open under load.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 256
	proxy.Transport = tr
	// Streams are passed on chunk by chunk, as the gateway does.
	proxy.FlushInterval = -1
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(w, "go_memstats_mallocs_total %d\ngo_goroutines %d\n", ms.Mallocs, runtime.NumGoroutine())
		for _, m := range []struct {
			name string
			v    uint64
		}{
			{"heap_alloc", ms.HeapAlloc}, {"heap_inuse", ms.HeapInuse}, {"heap_idle", ms.HeapIdle}, {"heap_released", ms.HeapReleased},
			{"stack_inuse", ms.StackInuse}, {"sys", ms.Sys}, {"next_gc", ms.NextGC},
		} {
			fmt.Fprintf(w, "go_memstats_%s_bytes %d\n", m.name, m.v)
		}
	})
	if *withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Without full duplex, flushing a stream's headers can cut off the
		// request body the transport is still copying upstream (HTTP/1.x),
		// and the stream fails.
		_ = http.NewResponseController(w).EnableFullDuplex()
		proxy.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	// The harness starts it on port 0 and reads the address here.
	fmt.Fprintf(os.Stderr, "{\"msg\":\"revproxy listening\",\"addr\":%q}\n", ln.Addr().String())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}
