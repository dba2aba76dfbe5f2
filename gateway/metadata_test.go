package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// Metadata is held to OpenAI's bounds (16 pairs, keys of 64 characters,
// values of 512) and to values a string can stand for, on chat and
// Responses alike, before anything runs.
func TestMetadataBounds(t *testing.T) {
	many := map[string]any{}
	for i := range 17 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	for _, tc := range []struct {
		name  string
		md    map[string]any
		param string
	}{
		{"17 pairs", many, "metadata"},
		{"a long key", map[string]any{strings.Repeat("k", 65): "v"}, "metadata"},
		{"a long value", map[string]any{"k": strings.Repeat("v", 513)}, "metadata.k"},
		{"an object", map[string]any{"cid": map[string]any{"x": 1}}, "metadata.cid"},
		{"an array", map[string]any{"cid": []any{1}}, "metadata.cid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw, fake, _ := desk(t)
			chat := gwtest.User("support", "hi")
			chat["metadata"] = tc.md
			assertParamError(t, gw.Chat(chat, nil), tc.param)
			resp := map[string]any{"model": "support", "input": "hi", "metadata": tc.md}
			assertParamError(t, gw.Do(context.Background(), http.MethodPost, "/v1/responses", resp, nil), tc.param)
			if n := len(fake.Requests()); n != 0 {
				t.Errorf("the model was called %d times", n)
			}
		})
	}
}

// A null metadata value is no value: a memory slot scoped by that key is
// not offered, where the value "null" would have been one profile shared
// by every caller that sends it.
func TestNullMetadataIsNoValue(t *testing.T) {
	gw, fake := memoryDesk(t, "memory://", fakeupstream.Reply{Text: "hello"})
	body := gwtest.User("support", "hi")
	body["metadata"] = map[string]any{"customer_id": nil}
	completion(t, gw, body, bearer("key-acme"))
	if names := toolNames(fake.Requests()[0]); slices.Contains(names, "remember_customer_profile") {
		t.Errorf("the slot was offered for a null customer_id: %v", names)
	}
}
