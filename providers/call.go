package providers

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/switchboard-ai/switchboard/runtime"
)

// Chat makes one call, retrying before the first byte of an answer.
//
// The provider's timeout bounds the whole call, retries included, streamed
// or not: a provider that trickles a delta every second forever is cut
// there. Within a stream, the idle timeout also bounds each wait for the
// next chunk. Both work by cancelling the call's context with a cause,
// which is how a provider timeout is told from the caller going away.
func (u *upstream) Chat(ctx context.Context, req *runtime.ChatRequest, onDelta func(string)) (*runtime.ChatResponse, error) {
	oreq, patch := toOpenAI(req)
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	deadline := time.AfterFunc(u.timeout, func() { cancel(errCallTimeout) })
	defer deadline.Stop()
	giveUp := time.Now().Add(u.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(giveUp) {
		giveUp = d
	}

	for try := 0; ; try++ {
		a := &attempt{client: u.httpc, headers: u.headers, patch: patch, bodies: &u.bodies, tracer: u.tracer,
			stream: req.Stream, maxBody: u.maxResponse, secrets: u.secrets}
		cfg := openai.DefaultConfig(u.apiKey)
		cfg.BaseURL = u.baseURL
		cfg.HTTPClient = a
		client := openai.NewClientWithConfig(cfg)

		var resp *runtime.ChatResponse
		var err error
		if req.Stream {
			resp, err = u.stream(callCtx, cancel, client, a, oreq, onDelta)
		} else {
			resp, err = u.complete(callCtx, client, a, oreq)
		}
		if err == nil {
			return resp, nil
		}
		wait, ok := u.retryWait(try, a, err)
		if !ok || callCtx.Err() != nil || time.Now().Add(wait).After(giveUp) {
			return nil, u.classify(ctx, callCtx, req, err)
		}
		u.log.LogAttrs(ctx, slog.LevelWarn, "provider call failed, retrying",
			slog.String("provider", u.name), slog.String("model", req.Model.Model),
			slog.Int("attempt", try+1), slog.Duration("wait", wait), slog.String("error", u.classify(ctx, callCtx, req, err).Error()))
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-callCtx.Done():
			t.Stop()
			return nil, u.classify(ctx, callCtx, req, err)
		}
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
func (u *upstream) complete(ctx context.Context, client *openai.Client, a *attempt, oreq openai.ChatCompletionRequest) (*runtime.ChatResponse, error) {
	if _, err := client.CreateChatCompletion(ctx, oreq); err != nil {
		return nil, err
	}
	if a.answer == nil {
		return nil, &answerError{"malformed answer: no body"}
	}
	out, err := fromOpenAI(a.answer)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// stream makes one streamed attempt. Once the stream is open, the idle
// timer bounds each wait for the next event, within the call's deadline.
func (u *upstream) stream(ctx context.Context, cancel context.CancelCauseFunc, client *openai.Client, a *attempt,
	oreq openai.ChatCompletionRequest, onDelta func(string)) (*runtime.ChatResponse, error) {
	// An open stream comes back as errStreamOpened, its body in a.
	_, err := client.CreateChatCompletionStream(ctx, oreq)
	switch {
	case err == nil:
		return nil, errors.New("providers: go-openai was handed an open stream")
	case !errors.Is(err, errStreamOpened):
		return nil, err
	}
	defer a.body.Close()
	idle := time.AfterFunc(u.idle, func() { cancel(errStreamIdle) })
	defer idle.Stop()

	var acc streamAcc
	// One chunk is decoded into again and again (decodeChunk): a stream is
	// many small chunks, and a fresh one each made most of the garbage an
	// open stream makes.
	var chunk openai.ChatCompletionStreamResponse
	events := newEventReader(a.body)
	for {
		data, err := events.next()
		if errors.Is(err, io.EOF) {
			// The answer is whole; a server that does not end the body
			// at once loses its connection rather than delay the answer.
			t := time.AfterFunc(drainWait, func() { cancel(errDrained) })
			a.drain()
			t.Stop()
			break
		}
		if err != nil {
			return nil, err
		}
		if err := decodeChunk(data, &chunk); err != nil {
			return nil, err
		}
		idle.Reset(u.idle)
		acc.add(&chunk, onDelta)
	}
	return acc.result()
}
