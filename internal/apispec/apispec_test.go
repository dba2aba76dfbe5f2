package apispec

import (
	"strings"
	"testing"
)

// The validator refuses what the descriptions refuse: a test built on it
// can fail.
func TestValidate(t *testing.T) {
	v := Load(t, OpenAI)
	good := `{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"hi","logprobs":[]}`
	if err := v.Validate("ResponseStreamEvent", []byte(good)); err != nil {
		t.Fatalf("a valid delta event: %v", err)
	}
	bad := strings.Replace(good, `"sequence_number":3,`, ``, 1)
	if err := v.Validate("ResponseStreamEvent", []byte(bad)); err == nil {
		t.Fatal("an event without sequence_number passed")
	}
	o := Load(t, OpenResponses)
	if err := o.Validate(OpenResponsesStreamEvent, []byte(good)); err != nil {
		t.Fatalf("a valid delta event (Open Responses): %v", err)
	}
	if err := o.Validate("ResponseResource", []byte(`{"id":"resp_1","object":"response"}`)); err == nil {
		t.Fatal("a response missing its required fields passed")
	}
}
