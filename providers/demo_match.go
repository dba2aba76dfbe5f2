package providers

import (
	"encoding/json"
	"strings"
	"unicode"

	"github.com/switchboard-ai/switchboard/runtime"
)

// demoStopWords are common words that would make every tool match.
func demoStopWords() map[string]bool {
	return map[string]bool{
		"about": true, "agent": true, "also": true, "been": true, "could": true, "desk": true,
		"does": true, "from": true, "hand": true, "handoff": true, "have": true, "hello": true,
		"help": true, "into": true, "just": true, "like": true, "need": true, "only": true,
		"please": true, "question": true, "questions": true, "should": true, "some": true,
		"thank": true, "thanks": true, "than": true, "that": true, "their": true, "them": true,
		"then": true, "there": true, "they": true, "this": true, "transfer": true, "user": true,
		"users": true, "very": true, "want": true, "were": true, "what": true, "when": true,
		"where": true, "which": true, "will": true, "with": true, "would": true, "your": true,
	}
}

// words returns the distinct lowercased words of s of 4 or more letters
// or digits, minus stop words, in order.
func words(s string, stop map[string]bool) []string {
	fields := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	seen := map[string]bool{}
	var out []string
	for _, w := range fields {
		if len([]rune(w)) < 4 || stop[w] || seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
	}
	return out
}

// wordsMatch tells whether two words are the same word for the demo:
// equal, one a prefix of the other, or the same first 5 letters.
func wordsMatch(a, b string) bool {
	if strings.HasPrefix(a, b) || strings.HasPrefix(b, a) {
		return true
	}
	ra, rb := []rune(a), []rune(b)
	return len(ra) >= 5 && len(rb) >= 5 && string(ra[:5]) == string(rb[:5])
}

// pickTool returns the offered tool that best matches the user's text; see
// demoModel. avoidFrom names the agent that just handed off, whose
// transfer_to_ tool is never picked.
func pickTool(tools []runtime.ToolDef, userText, avoidFrom string) (runtime.ToolDef, bool) {
	stop := demoStopWords()
	user := words(userText, stop)
	if len(user) == 0 {
		return runtime.ToolDef{}, false
	}
	avoid := ""
	if avoidFrom != "" {
		avoid = "transfer_to_" + strings.Join(strings.Fields(strings.ToLower(avoidFrom)), "_")
	}
	best, bestScore := -1, 0
	for i, t := range tools {
		if t.Name == avoid || !demoCanCall(t.Parameters) {
			continue
		}
		name := strings.NewReplacer("_", " ", "-", " ").Replace(t.Name)
		toolWords := words(name+" "+t.Description, stop)
		score := 0
		for _, u := range user {
			for _, w := range toolWords {
				if wordsMatch(u, w) {
					score++
					break
				}
			}
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 {
		return runtime.ToolDef{}, false
	}
	return tools[best], true
}

// toolSchema is the part of a parameters schema the demo reads.
type toolSchema struct {
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
}

// demoCanCall tells whether the demo can fill the schema: it requires
// nothing but `reason`.
func demoCanCall(params json.RawMessage) bool {
	if len(params) == 0 {
		return true
	}
	var s toolSchema
	if json.Unmarshal(params, &s) != nil {
		return false
	}
	for _, r := range s.Required {
		if r != "reason" {
			return false
		}
	}
	return true
}

// schemaHasReason tells whether the schema has a `reason` property.
func schemaHasReason(params json.RawMessage) bool {
	var s toolSchema
	if json.Unmarshal(params, &s) != nil {
		return false
	}
	_, ok := s.Properties["reason"]
	return ok
}
