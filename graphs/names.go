package graphs

import (
	"regexp"
	"strings"
	"unicode"
)

// toolNamePattern is what OpenAI-compatible APIs accept as a function name.
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// DeriveToolName returns the default tool name of a handoff to agent:
// transfer_to_ + the name lowercased, with runs of whitespace turned into
// "_" ("Refund Agent" -> "transfer_to_refund_agent"). The result may still
// be an invalid tool name (non-ASCII letters, punctuation, length); such a
// handoff needs an explicit tool_name.
func DeriveToolName(agent string) string {
	var b strings.Builder
	b.WriteString("transfer_to_")
	inSpace := false
	for _, r := range strings.ToLower(agent) {
		if unicode.IsSpace(r) {
			if !inSpace {
				b.WriteByte('_')
			}
			inSpace = true
			continue
		}
		inSpace = false
		b.WriteRune(r)
	}
	return b.String()
}

// validToolName reports whether name can be offered to a model as a tool:
// whether it matches toolNamePattern, which error messages quote. A
// request's client tools are each checked, and the loop costs a tenth of
// the regular expression (FuzzValidToolName holds the two
// together).
func validToolName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch b := name[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '_', b == '-':
		default:
			return false
		}
	}
	return true
}

// containsSlash reports whether s has a "/".
func containsSlash(s string) bool { return strings.Contains(s, "/") }

// hasControl reports whether s holds a control character. Agent and graph
// names end up in response headers and log lines, where those do harm.
func hasControl(s string) bool {
	return strings.ContainsFunc(s, unicode.IsControl)
}
