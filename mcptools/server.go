package mcptools

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"

	"github.com/switchboard-ai/switchboard/graphs"
)

// This file keeps one server connected: connect and list its tools, watch
// the session, and when it is lost, reconnect with backoff, forever, until
// the manager closes.

// Backoff between connection attempts: it doubles from minBackoff after
// each failure, up to maxBackoff, and starts over once a session has lasted
// stableAfter. A call to a server that is down cuts the wait short.
const (
	minBackoff  = 250 * time.Millisecond
	maxBackoff  = 3 * time.Second
	stableAfter = 10 * time.Second
)

// pingInterval is how often a connected server is pinged. A ping that fails
// ends the session and starts a reconnection: an HTTP server that restarted
// has forgotten the session, and one that went away says nothing on its own.
const pingInterval = 10 * time.Second

// version is the client version sent to servers.
const version = "1"

// server is one entry of `mcp_servers:` and its connection.
type server struct {
	cfg      *graphs.MCPServer
	log      *slog.Logger
	http     http.RoundTripper
	prop     propagation.TextMapPropagator
	onListed func() // the tool list changed
	kick     chan struct{}

	mu    sync.Mutex
	cur   *conn       // nil while down
	tools []*mcp.Tool // the last listing, allow-listed; kept while down
}

// conn is one session with a server.
type conn struct {
	session *mcp.ClientSession
	proc    *process // nil for HTTP
	lost    chan struct{}
	once    sync.Once
	why     string
	// calls is the context every call on the session runs under: closing
	// the session cancels it first, since the SDK's Close waits for the
	// calls in flight, which a hung server would never answer.
	calls       context.Context
	cancelCalls context.CancelFunc
}

// newConn returns a conn with no session yet.
func newConn() *conn {
	c := &conn{lost: make(chan struct{})}
	c.calls, c.cancelCalls = context.WithCancel(context.Background())
	return c
}

// breakOff marks the session lost, for the server's loop to reconnect.
func (c *conn) breakOff(why string) {
	c.once.Do(func() {
		c.why = why
		close(c.lost)
	})
}

// isLost reports whether the session was found broken.
func (c *conn) isLost() bool {
	select {
	case <-c.lost:
		return true
	default:
		return false
	}
}

// close ends the calls in flight, the session and, for stdio, the process.
func (c *conn) close() {
	c.cancelCalls()
	_ = c.session.Close()
	if c.proc != nil {
		c.proc.Stop()
	}
}

// current returns the live session, or nil while the server is down.
func (s *server) current() *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// listed returns the last listing, nil when the server never answered.
func (s *server) listed() []*mcp.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

// wake cuts the backoff wait short.
func (s *server) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// run keeps the server connected until ctx is done. first is called once
// the first attempt is over, whatever its outcome, and logged: Start
// returns then, and what it reports is told by then.
func (s *server) run(ctx context.Context, first func()) {
	attempted := func() {
		if first != nil {
			first()
			first = nil
		}
	}
	defer attempted()
	delay := minBackoff
	failures := 0
	for {
		c, err := s.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			if failures == 1 {
				s.log.Warn("mcp server unreachable; retrying in the background", "err", err)
			} else {
				s.log.Debug("mcp server still unreachable", "err", err, "attempts", failures)
			}
			attempted()
			if !s.sleep(ctx, delay) {
				return
			}
			delay = min(2*delay, maxBackoff)
			continue
		}
		failures = 0
		s.log.Info("mcp server connected", "tools", len(s.listed()))
		attempted()
		began := time.Now()
		s.watch(ctx, c)
		s.mu.Lock()
		s.cur = nil
		s.mu.Unlock()
		c.close()
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("mcp server connection lost; reconnecting", "reason", c.why)
		if time.Since(began) > stableAfter {
			delay = minBackoff
		}
		if !s.sleep(ctx, delay) {
			return
		}
		delay = min(2*delay, maxBackoff)
	}
}

// sleep waits d, or less when a call wakes it; false when ctx is done.
func (s *server) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-s.kick:
	}
	return true
}

// connect opens a session and lists the server's tools, within the
// server's timeout. On success the session is current.
func (s *server) connect(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	c := newConn()
	var transport mcp.Transport
	if s.cfg.URL != "" {
		transport = httpTransport(s.cfg, s.http, s.prop)
	} else {
		p, err := startProcess(s.cfg, s.log)
		if err != nil {
			return nil, err
		}
		c.proc = p
		transport = &mcp.IOTransport{Reader: p.stdout, Writer: p.stdin}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard", Version: version}, &mcp.ClientOptions{
		// No roots, sampling or elicitation: the gateway only calls tools.
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) { go s.relist(c, req.Session) },
		Logger:                 s.log,
	})
	fail := func(err error) (*conn, error) {
		c.cancelCalls()
		if c.session != nil {
			_ = c.session.Close()
		}
		if c.proc != nil {
			c.proc.Stop()
			if last := c.proc.stderr.Last(); last != "" {
				err = fmt.Errorf("%w (its last stderr line: %s)", err, last)
			}
		}
		return nil, err
	}
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return fail(fmt.Errorf("connect: %w", err))
	}
	c.session = session
	tools, err := s.list(ctx, session)
	if err != nil {
		return fail(err)
	}
	s.mu.Lock()
	s.cur, s.tools = c, tools
	s.mu.Unlock()
	s.onListed()
	return c, nil
}

// list reads every page of the server's tools and keeps the allowed ones.
func (s *server) list(ctx context.Context, session *mcp.ClientSession) ([]*mcp.Tool, error) {
	tools := []*mcp.Tool{}
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", err)
		}
		if s.cfg.Allows(t.Name) {
			tools = append(tools, t)
		}
	}
	return tools, nil
}

// relist reads the tools again after the server said they changed.
func (s *server) relist(c *conn, session *mcp.ClientSession) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	tools, err := s.list(ctx, session)
	if err != nil {
		s.log.Warn("mcp server: listing its changed tools failed", "err", err)
		return
	}
	s.mu.Lock()
	if s.cur != c {
		s.mu.Unlock()
		return
	}
	s.tools = tools
	s.mu.Unlock()
	s.log.Info("mcp server tools changed", "tools", len(tools))
	s.onListed()
}

// watch returns once the session is lost or ctx is done, pinging the
// server now and then.
func (s *server) watch(ctx context.Context, c *conn) {
	ended := make(chan struct{})
	go func() {
		_ = c.session.Wait()
		close(ended)
	}()
	var exited chan struct{}
	if c.proc != nil {
		exited = c.proc.exited
	}
	tick := time.NewTicker(pingInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.lost:
			return
		case <-ended:
			c.breakOff("the session ended")
			return
		case <-exited:
			c.breakOff("the server process exited")
			return
		case <-tick.C:
			go s.check(c)
		}
	}
}

// check pings the server and breaks the session off when it does not
// answer; it reports whether the server answered.
func (s *server) check(c *conn) bool {
	ctx, cancel := context.WithTimeout(context.Background(), min(s.cfg.Timeout, 5*time.Second))
	defer cancel()
	if err := c.session.Ping(ctx, nil); err != nil {
		c.breakOff(fmt.Sprintf("ping failed: %v", err))
		return false
	}
	return true
}
