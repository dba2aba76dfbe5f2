package goclient_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// apiError asserts err is the SDK's *openai.Error with status and code,
// every field the SDK requires present.
func apiError(t *testing.T, err error, status int, code, param string) {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("want *openai.Error %d %s, got %T: %v", status, code, err, err)
	}
	requireFields(t, "error", e)
	if e.StatusCode != status || e.Code != code || e.Param != param || e.Message == "" {
		t.Errorf("error %d code %q param %q message %q; want %d %q %q", e.StatusCode, e.Code, e.Param, e.Message, status, code, param)
	}
	wantType := "invalid_request_error"
	if status >= 500 {
		wantType = "server_error"
	}
	if e.Type != wantType {
		t.Errorf("type %q, want %q", e.Type, wantType)
	}
}

// accumulate reads a stream to its end into the SDK's accumulator, every
// chunk of which it must take; the stream's error is the caller's to read.
func accumulate(t *testing.T, stream *ssestream.Stream[openai.ChatCompletionChunk]) openai.ChatCompletionAccumulator {
	t.Helper()
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("the accumulator refused %.200s", stream.Current().RawJSON())
		}
	}
	return acc
}

func TestErrors(t *testing.T) {
	oa := gateway(t)
	ctx := context.Background()

	t.Run("unknown model", func(t *testing.T) {
		f := newFake(t)
		params := user("hi")
		params.Model = "no-such-graph"
		_, err := oa.Chat.Completions.New(ctx, params)
		apiError(t, err, http.StatusNotFound, "model_not_found", "model")
		if n := len(f.requests()); n != 0 {
			t.Errorf("the upstream was called %d times", n)
		}
	})

	t.Run("malformed message", func(t *testing.T) {
		newFake(t)
		params := user("hi")
		params.Messages = append(params.Messages, openai.ToolMessage("42", ""))
		_, err := oa.Chat.Completions.New(ctx, params)
		apiError(t, err, http.StatusBadRequest, "invalid_request", "messages[1]")
	})

	t.Run("invalid session id", func(t *testing.T) {
		newFake(t)
		_, err := oa.Chat.Completions.New(ctx, user("hi"), option.WithHeader("X-Session-Id", "not a valid id"))
		apiError(t, err, http.StatusBadRequest, "invalid_request", "")
	})

	t.Run("upstream failure", func(t *testing.T) {
		newFake(t, fakeReply{Status: http.StatusBadRequest, Text: "the provider says no"})
		_, err := oa.Chat.Completions.New(ctx, user("hi"))
		apiError(t, err, http.StatusBadGateway, "upstream_error", "")
	})

	t.Run("upstream failure before a stream starts", func(t *testing.T) {
		newFake(t, fakeReply{Status: http.StatusBadRequest, Text: "the provider says no"})
		stream := oa.Chat.Completions.NewStreaming(ctx, user("hi"))
		defer stream.Close()
		for stream.Next() {
			t.Errorf("a chunk before the error: %s", stream.Current().RawJSON())
		}
		apiError(t, stream.Err(), http.StatusBadGateway, "upstream_error", "")
	})

	// A stream's attempt that the provider refuses with a 503 is retried
	// (max_retries), and the client sees only the stream that follows.
	t.Run("a stream retried after a 503", func(t *testing.T) {
		f := newFake(t, fakeReply{Status: http.StatusServiceUnavailable, Text: "busy"}, fakeReply{StreamChunks: []string{"Hel", "lo"}})
		stream := oa.Chat.Completions.NewStreaming(ctx, user("hi"))
		defer stream.Close()
		acc := accumulate(t, stream)
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) == 0 || acc.Choices[0].Message.Content != "Hello" {
			t.Errorf("streamed text %+v, want Hello", acc.Choices)
		}
		if n := len(f.requests()); n != 2 {
			t.Errorf("the upstream got %d requests, want 2 (the 503, then the stream)", n)
		}
	})

	t.Run("error after a stream started", func(t *testing.T) {
		newFake(t, fakeReply{StreamChunks: []string{"Hel", "lo"}, StreamError: "the model crashed"})
		stream := oa.Chat.Completions.NewStreaming(ctx, user("hi"))
		defer stream.Close()
		acc := accumulate(t, stream)
		// The SDK turns the error event into the stream's error.
		if err := stream.Err(); err == nil {
			t.Fatal("the stream ended without the error")
		}
		if acc.Choices[0].Message.Content != "Hello" {
			t.Errorf("text before the error: %q", acc.Choices[0].Message.Content)
		}
	})

	// A provider's event line over 1 MiB is an upstream gone wrong
	// (max_response_bytes, CONTRACT): before the stream starts the client
	// gets a 502, after it an error event, with the text before it intact.
	overLine := strings.Repeat("x", 1<<20+1)
	t.Run("an event line over the bound before a stream starts", func(t *testing.T) {
		newFake(t, fakeReply{StreamChunks: []string{overLine}})
		stream := oa.Chat.Completions.NewStreaming(ctx, user("hi"))
		defer stream.Close()
		for stream.Next() {
			t.Errorf("a chunk before the error: %.200s", stream.Current().RawJSON())
		}
		apiError(t, stream.Err(), http.StatusBadGateway, "upstream_error", "")
		if e := (*openai.Error)(nil); errors.As(stream.Err(), &e) && !strings.Contains(e.Message, "response too large") {
			t.Errorf("error message %q, want it to say response too large", e.Message)
		}
	})

	t.Run("an event line over the bound after a stream started", func(t *testing.T) {
		newFake(t, fakeReply{StreamChunks: []string{"Hel", "lo", overLine}})
		stream := oa.Chat.Completions.NewStreaming(ctx, user("hi"))
		defer stream.Close()
		acc := accumulate(t, stream)
		if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "response too large") {
			t.Errorf("stream error %v, want it to say response too large", err)
		}
		if len(acc.Choices) == 0 || acc.Choices[0].Message.Content != "Hello" {
			t.Errorf("text before the error: %+v", acc.Choices)
		}
	})

	t.Run("unknown model retrieved", func(t *testing.T) {
		_, err := oa.Models.Get(ctx, "no-such-graph")
		apiError(t, err, http.StatusNotFound, "model_not_found", "model")
	})
}

func TestModels(t *testing.T) {
	oa := gateway(t)
	ctx := context.Background()
	page, err := oa.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	requireFields(t, "models", page)
	var ids []string
	iter := oa.Models.ListAutoPaging(ctx)
	for iter.Next() {
		m := iter.Current()
		requireFields(t, "model", m)
		if m.Object != "model" || m.OwnedBy != "switchboard" || !m.JSON.Created.Valid() {
			t.Errorf("model: %s", m.RawJSON())
		}
		ids = append(ids, m.ID)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"support", "tech"}) {
		t.Errorf("models: %v", ids)
	}
	m, err := oa.Models.Get(ctx, "tech")
	if err != nil {
		t.Fatal(err)
	}
	requireFields(t, "model", m)
	if m.ID != "tech" || m.OwnedBy != "switchboard" {
		t.Errorf("model: %s", m.RawJSON())
	}
}
