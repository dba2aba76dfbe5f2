package gateway_test

import (
	"strings"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
)

// An agent SDK that continues with previous_response_id sends its
// instructions with every turn. Kept like client system messages
// (CONTRACT §10), the same text is said once in the prompt, where it was
// said last, not once per turn; different instructions are each kept.
func TestRepeatedInstructionsSaidOnce(t *testing.T) {
	stores(t, func(t *testing.T, storeURL string) {
		gw, fake := sessionDesk(t, storeURL, fakeupstream.Reply{Text: "one"}, fakeupstream.Reply{Text: "two"}, fakeupstream.Reply{Text: "three"})
		r1 := create(t, gw, input("first", "instructions", "Use tools."), nil)
		r2 := create(t, gw, input("second", "instructions", "Use tools.", "previous_response_id", r1.ID), nil)
		create(t, gw, input("third", "instructions", "Answer in French.", "previous_response_id", r2.ID), nil)
		reqs := fake.Requests()
		if got := systemPrompt(t, reqs[1]); strings.Count(got, "Use tools.") != 1 {
			t.Errorf("turn 2's system prompt says the instructions %d times: %q", strings.Count(got, "Use tools."), got)
		}
		got := systemPrompt(t, reqs[2])
		if strings.Count(got, "Use tools.") != 1 || !strings.HasSuffix(got, "Use tools.\n\nAnswer in French.") {
			t.Errorf("turn 3's system prompt %q", got)
		}
	})
}
