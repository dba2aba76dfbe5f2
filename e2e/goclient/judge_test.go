package goclient_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
)

// The strictness check must fail a reply that lacks what the SDK requires,
// or it judges nothing: refusal and logprobs missing, an index of the
// wrong type.
func TestFieldProblemsCatchesAMissingField(t *testing.T) {
	var c openai.ChatCompletion
	body := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":{"n":0},"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}]}`
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatal(err)
	}
	got := fieldProblems("reply", reflect.ValueOf(c))
	for _, want := range []string{
		`reply.choices[0].index: the SDK cannot read {"n":0}`,
		"reply.choices[0].logprobs: required by the SDK, missing",
		"reply.choices[0].message.refusal: required by the SDK, missing",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %q in %q", want, got)
		}
	}
	var ok openai.ChatCompletion
	body = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"x","refusal":null},"finish_reason":"stop","logprobs":null}]}`
	if err := json.Unmarshal([]byte(body), &ok); err != nil {
		t.Fatal(err)
	}
	if got := fieldProblems("reply", reflect.ValueOf(ok)); len(got) != 0 {
		t.Errorf("a complete reply: %q", got)
	}
}
