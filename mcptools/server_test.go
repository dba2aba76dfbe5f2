package mcptools

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-ai/switchboard/internal/testenv"
)

// The tests run this package's test binary as a stdio MCP server (and as
// the child such a server starts), chosen by testServerEnv, and serve the
// same tools over streamable HTTP in process.

const testServerEnv = "MCPTOOLS_TEST_SERVER"

func TestMain(m *testing.M) {
	switch os.Getenv(testServerEnv) {
	case "":
		testenv.VerifyNoLeaks(m)
	case "stdio":
		if err := newTestServer(nil, nil).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "child":
		// A grandchild of the gateway, which a stdio server may leave
		// behind: it lives until it is killed.
		time.Sleep(time.Hour)
		os.Exit(0)
	}
}

// newTestServer is an MCP server whose tools exercise the manager.
// onSlow, when set, is called when the slow tool starts, which then returns
// when its call is cancelled or release is closed.
func newTestServer(onSlow func(), release <-chan struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptools-test", Version: "1"}, nil)
	type echoIn struct {
		Message string `json:"message"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes the message"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "Echo: " + in.Message},
				&mcp.TextContent{Text: "second part"},
			}}, nil, nil
		})
	type weather struct {
		Temperature int    `json:"temperature"`
		Conditions  string `json:"conditions"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "weather", Description: "Structured content only"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, weather, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{}}, weather{Temperature: 21, Conditions: "Sunny"}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fails as a tool"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the customer does not exist"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "big", Description: "Answers more than 1 MiB"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", MaxResultBytes+1)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Answers when the call is cancelled"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if onSlow != nil {
				onSlow()
			}
			select {
			case <-ctx.Done():
			case <-release:
			}
			return nil, nil, ctx.Err()
		})
	mcp.AddTool(s, &mcp.Tool{Name: "die", Description: "Exits mid-call"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "spawn", Description: "Starts a child that never exits and returns its pid"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), testServerEnv+"=child")
			if err := cmd.Start(); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(cmd.Process.Pid)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "getenv", Description: "Reads an environment variable"},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Name string `json:"name"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Name + "=" + os.Getenv(in.Name)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "pid", Description: "Returns the server's pid"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strconv.Itoa(os.Getpid())}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "bad.name", Description: "Cannot be offered to a model"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
	return s
}

// httpServer serves newTestServer over streamable HTTP on a loopback
// address that survives a restart, so that tests can kill it and bring it
// back where the config points.
type httpServer struct {
	t    *testing.T
	addr string
	srv  *http.Server
	mcp  *mcp.Server
	// wantAuth, when set, is the Authorization header every request needs.
	wantAuth string
	// slowStarted receives once a call of the slow tool has started.
	slowStarted chan struct{}
	// release ends the slow tool's calls, when the server stops.
	release chan struct{}
}

// startHTTPServer listens on a port of its own (reserveAddr), where a
// restart finds it free.
func startHTTPServer(t *testing.T, wantAuth string) *httpServer {
	t.Helper()
	h := &httpServer{t: t, addr: reserveAddr(t), wantAuth: wantAuth, slowStarted: make(chan struct{}, 1)}
	h.start()
	t.Cleanup(h.stop)
	return h
}

// reserveAddr returns a loopback address nothing listens on yet, and that
// nothing but this test takes until it ends (testenv.PrivatePort): a
// server killed there can be brought back, and one not started yet is
// refused meanwhile.
func reserveAddr(t *testing.T) string {
	t.Helper()
	return testenv.RefusingAddr(t)
}

func (h *httpServer) URL() string { return "http://" + h.addr + "/mcp" }

func (h *httpServer) serve(ln net.Listener) {
	h.release = make(chan struct{})
	mcpServer := newTestServer(func() {
		select {
		case h.slowStarted <- struct{}{}:
		default:
		}
	}, h.release)
	h.mcp = mcpServer
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpServer }, nil)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.wantAuth != "" && r.Header.Get("Authorization") != h.wantAuth {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	})}
	h.srv = srv
	go func() { _ = srv.Serve(ln) }()
}

// stop kills the server: every connection is dropped at once, and every
// session forgotten, as a restarted process would.
func (h *httpServer) stop() {
	if h.srv != nil {
		close(h.release)
		_ = h.srv.Close()
		h.srv = nil
		for ss := range h.mcp.Sessions() {
			_ = ss.Close()
		}
	}
}

// start (re)starts the server on its address.
func (h *httpServer) start() {
	h.t.Helper()
	var ln net.Listener
	var err error
	// The port was just freed; on a busy machine it may take a moment.
	for range 50 {
		if ln, err = net.Listen("tcp", h.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	h.serve(ln)
}
