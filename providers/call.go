package providers

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchboard-ai/switchboard/internal/freshstack"
	"github.com/switchboard-ai/switchboard/runtime"
)

// Chat makes one call, retrying before the first byte of an answer.
//
// The provider's timeout bounds the whole call, retries included, streamed
// or not: a provider that trickles a delta every second forever is cut
// there. Within a stream, the idle timeout also bounds each wait for the
// next chunk. Both work by cancelling the call's context with a cause,
// which is how a provider timeout is told from the caller going away.
//
// A stream is read for as long as it lasts from under Chat, on the
// request's goroutine, below the run loop and the gateway: every byte of
// the frames between the handler and the socket read is held by every open
// stream, and a goroutine whose deepest moment passes 16 KB keeps 32 KB of
// stack to its end (issue 22). So Chat and stream keep their state in a
// call on the heap, and what needs a large frame (building go-openai's
// request, opening the stream, a retry's log line) is in functions that
// have returned before the first chunk is read.
func (u *upstream) Chat(ctx context.Context, req *runtime.ChatRequest, onDelta func(string)) (*runtime.ChatResponse, error) {
	c := u.newCall(ctx, req)
	defer c.end()
	for try := 0; ; try++ {
		c.newAttempt()
		var resp *runtime.ChatResponse
		var err error
		if req.Stream {
			if err = c.openStream(); err == nil {
				resp, err = c.stream(onDelta)
			}
		} else {
			resp, err = c.complete()
		}
		if err == nil {
			return resp, nil
		}
		if err := c.retry(try, err); err != nil {
			return nil, err
		}
	}
}

// call is one call to an upstream, over its attempts.
type call struct {
	// What a stream's every chunk touches comes first, in three cache
	// lines, since a stream that waited for its next chunk finds each line
	// gone cold (issue 22): the event reader (one line), the assembler,
	// and the time of the last event.
	//
	// events reads the stream's body.
	events eventReader
	acc    streamAcc
	// timer cancels ctx at the provider's timeout (start + u.timeout) and,
	// once a stream is open, when it has sent nothing for u.idle: one timer
	// for both, since every open stream held two (issue 22). lastEvent is
	// when the stream's last event came, as time since start, or -1 before
	// the stream is open. An event only stores the time; the timer, when
	// it fires early, sets itself again for the later of the two (fire).
	lastEvent atomic.Int64
	start     time.Time
	timer     *time.Timer

	u       *upstream
	req     *runtime.ChatRequest
	parent  context.Context // the caller's
	ctx     context.Context // the call's: cancelled at its timeout
	cancel  context.CancelCauseFunc
	actx    attemptCtx // ctx, with the attempt for go-openai's doer
	a       attempt    // the attempt in flight
	openErr error      // what opening the attempt's stream returned
	// chunk is where encoding/json decodes the chunks readChunk does not
	// read, again and again (takeChunk).
	chunk openai.ChatCompletionStreamResponse
}

func (u *upstream) newCall(ctx context.Context, req *runtime.ChatRequest) *call {
	c := &call{u: u, req: req, parent: ctx}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	c.actx = attemptCtx{Context: c.ctx, a: &c.a}
	c.start = time.Now()
	c.lastEvent.Store(-1)
	c.timer = time.AfterFunc(u.timeout, c.fire)
	return c
}

// giveUp returns when the call, retries included, must be over: at its
// timeout, or the caller's deadline if sooner. Only a retry asks, so it is
// not kept in the call.
func (c *call) giveUp() time.Time {
	t := c.start.Add(c.u.timeout)
	if d, ok := c.parent.Deadline(); ok && d.Before(t) {
		t = d
	}
	return t
}

// fire runs when the call's timer goes off: at the call's deadline, the
// call has timed out; in a stream that has sent nothing for the idle
// timeout, the stream is idle; else an event came since the timer was set,
// and it is set again for the sooner of the two.
func (c *call) fire() {
	if c.ctx.Err() != nil {
		return // over, or cancelled already
	}
	now := time.Since(c.start)
	if now >= c.u.timeout {
		c.cancel(errCallTimeout)
		return
	}
	last := c.lastEvent.Load()
	if last < 0 { // not a stream yet: only the deadline counts
		c.timer.Reset(c.u.timeout - now)
		return
	}
	idleAt := time.Duration(last) + c.u.idle
	if now >= idleAt {
		c.cancel(errStreamIdle)
		return
	}
	c.timer.Reset(min(idleAt, c.u.timeout) - now)
}

// event records that a stream's event came now, for the idle timeout.
func (c *call) event() { c.lastEvent.Store(int64(time.Since(c.start))) }

// end releases the call's context and timer.
func (c *call) end() {
	c.timer.Stop()
	c.cancel(nil)
}

// newAttempt starts a fresh attempt.
func (c *call) newAttempt() {
	u := c.u
	c.a = attempt{client: u.httpc, headers: u.headers, bodies: &u.bodies, tracer: u.tracer,
		stream: c.req.Stream, maxBody: u.maxResponse, secrets: u.secrets}
}

// request returns go-openai's request for the attempt, and gives the
// attempt its body patch. It is built for each attempt, in the frame of a
// function that returns before a stream is read, rather than kept in the
// call: go-openai's request is 400 bytes that every open stream held to its
// end, and only a retry, rare and far dearer than building it, needs it
// again (issue 22).
func (c *call) request() openai.ChatCompletionRequest {
	oreq, patch := toOpenAI(c.req)
	c.a.patch = patch
	return oreq
}

// attemptCtx is the context go-openai is handed: the call's, which also
// leads the request go-openai builds to the call's attempt (attemptDoer).
// Its Value answers the context package's own lookups from the call's
// context, so a context derived from it is still cancelled with the call's
// without a goroutine of its own.
type attemptCtx struct {
	context.Context
	a *attempt
}

// attemptKey is the key under which an attemptCtx holds its attempt.
type attemptKey struct{}

// Value returns the attempt for attemptKey, else the call's context's value.
func (c *attemptCtx) Value(key any) any {
	if key == (attemptKey{}) {
		return c.a
	}
	return c.Context.Value(key)
}

// attemptDoer is the HTTP doer of an upstream's one go-openai client: it
// sends each request through the attempt its context leads to. One client
// for all the calls of an upstream, where a client for each call made five
// allocations each time (issue 22).
type attemptDoer struct{}

// errNoAttempt is a request that did not come through a call.
var errNoAttempt = errors.New("providers: request without an attempt in its context")

// Do sends req through its attempt.
func (attemptDoer) Do(req *http.Request) (*http.Response, error) {
	a, ok := req.Context().Value(attemptKey{}).(*attempt)
	if !ok {
		return nil, errNoAttempt
	}
	return a.Do(req)
}

// newClient returns an upstream's go-openai client.
func newClient(apiKey, baseURL string) *openai.Client {
	cfg := openai.DefaultConfig(apiKey)
	cfg.BaseURL = baseURL
	cfg.HTTPClient = attemptDoer{}
	return openai.NewClientWithConfig(cfg)
}

// retry decides whether the attempt try, which failed with err, is
// retried, and waits for it: nil to try again, else the call's error.
func (c *call) retry(try int, err error) error {
	u := c.u
	wait, ok := u.retryWait(try, &c.a, err)
	if !ok || c.ctx.Err() != nil || time.Now().Add(wait).After(c.giveUp()) {
		return u.classify(c.parent, c.ctx, c.req, err)
	}
	u.log.LogAttrs(c.parent, slog.LevelWarn, "provider call failed, retrying",
		slog.String("provider", u.name), slog.String("model", c.req.Model.Model),
		slog.Int("attempt", try+1), slog.Duration("wait", wait), slog.String("error", u.classify(c.parent, c.ctx, c.req, err).Error()))
	t := time.NewTimer(wait)
	select {
	case <-t.C:
		return nil
	case <-c.ctx.Done():
		t.Stop()
		return u.classify(c.parent, c.ctx, c.req, err)
	}
}

// retryWait decides whether attempt try, which failed with err, is retried
// and after how long.
func (u *upstream) retryWait(try int, a *attempt, err error) (time.Duration, bool) {
	if a.opened || try >= u.maxRetries || !retryable(err) {
		return 0, false
	}
	if status, _, _ := apiStatus(err); status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		if d, ok := retryAfter(a.header, time.Now()); ok {
			return d, true
		}
	}
	d := u.baseDelay << try
	return d/2 + rand.N(d/2+1), true // jitter spreads the retries of concurrent runs
}

// complete makes one non-streamed attempt. The answer is decoded by the
// attempt as it arrives (attempt.decode), not by go-openai.
func (c *call) complete() (*runtime.ChatResponse, error) {
	if _, err := c.u.oc.CreateChatCompletion(&c.actx, c.request()); err != nil {
		return nil, err
	}
	if c.a.answer == nil {
		return nil, &answerError{"malformed answer: no body"}
	}
	out, err := fromOpenAI(c.a.answer)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// openStream opens the attempt's stream. go-openai builds the request
// aside, where building it goes 5.5 KB deeper than reading the stream
// (freshstack: the stream's goroutine keeps an 8 KB stack), and the
// attempt holds it rather than send it (attempt.hold). It is sent from
// here, straight through the transport (attempt.roundTrip), so that the
// wait for the answer's headers is the stream's own goroutine's: when it
// was the aside goroutine's, every stream opening at once held one more
// goroutine and its 8 KB stack, over a thousand at 5,000 streams opened in
// two seconds (issue 22). An answer that is not the stream is handed to
// go-openai aside, as if it had sent the request (attempt.replay), and
// makes the same error; a redirect, which net/http's client would follow,
// is sent again through it. A provider URL with a user and password is
// always sent through the client, which makes them a basic authorization.
func (c *call) openStream() error {
	if c.u.viaClient {
		freshstack.Run(c.openAside)
		return c.openErr
	}
	c.a.hold = true
	freshstack.Run(c.openAside)
	c.a.hold = false
	if !errors.Is(c.openErr, errRequestHeld) {
		return c.openErr
	}
	req := c.a.held
	c.a.held = nil
	resp, err := c.a.send(req, true)
	switch {
	case errors.Is(err, errStreamOpened):
		c.a.patch = nil // the body has left
		return nil
	case errors.Is(err, errRedirected):
	case err != nil:
		return err
	default:
		c.a.replay = resp
	}
	freshstack.Run(c.openAside)
	c.a.replay = nil
	return c.openErr
}

// openAside opens the stream into c.openErr, for freshstack.Run.
func (c *call) openAside() { c.openErr = c.open() }

// open sends a streamed attempt; once it is open, its body is in c.a.
func (c *call) open() error {
	// An open stream comes back as errStreamOpened, its body in the
	// attempt.
	_, err := c.u.oc.CreateChatCompletionStream(&c.actx, c.request())
	switch {
	case err == nil:
		return errors.New("providers: go-openai was handed an open stream")
	case !errors.Is(err, errStreamOpened):
		return err
	}
	c.a.patch = nil // the body has left
	return nil
}

// stream reads an open stream. The call's timer bounds each wait for the
// next event by the idle timeout, within the call's deadline: it is set
// for the sooner of the two here, and each event records its time (fire).
// The run is told before each wait, and at the stream's end, that the
// deltas read so far have all been handed over (runtime.StreamPauser): the
// deltas of one read leave for the client together. It is told only when
// a chunk was handed over since it was last told (eventReader.handed).
func (c *call) stream(onDelta func(string)) (*runtime.ChatResponse, error) {
	defer c.a.body.Close()
	c.event()
	if left := c.u.timeout - time.Duration(c.lastEvent.Load()); left > 0 {
		c.timer.Reset(min(c.u.idle, left))
	}
	c.acc = streamAcc{}
	var pause runtime.Pauser
	if onDelta != nil { // a stream with no one to take its deltas has none to batch
		pause = runtime.StreamPauser(c.parent)
	}
	events := &c.events
	events.reset(c.a.body, pause, c.u.maxResponse)
	defer events.close()
	for {
		data, err := events.next()
		if errors.Is(err, io.EOF) {
			events.src.paused() // before the drain, which may wait
			c.drain()
			break
		}
		if err != nil {
			return nil, err
		}
		c.event()
		if err := c.acc.takeChunk(data, &c.chunk, onDelta); err != nil {
			return nil, err
		}
		events.handed()
	}
	return c.acc.result()
}

// drain reads the rest of a whole answer's body: a server that does not
// end the body at once loses its connection rather than delay the answer.
func (c *call) drain() {
	t := time.AfterFunc(c.u.drainWait, c.drained)
	c.a.drain()
	t.Stop()
}

func (c *call) drained() { c.cancel(errDrained) }
