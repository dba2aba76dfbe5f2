package gateway

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/switchboard-ai/switchboard/internal/jsonenc"
	"github.com/switchboard-ai/switchboard/runtime"
)

// haltMembers renders what an interceptor that halted the run put in its
// Metadata (a guardrail's {name, stage, reason}) as the JSON members
// `,"key":value` that a reply's metadata object carries besides agentName
// and sessionId; nil when the run was not halted.
func haltMembers(h *runtime.Halt) []byte {
	if h == nil || len(h.Metadata) == 0 {
		return nil
	}
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(h.Metadata)) {
		if k == "agentName" || k == "sessionId" {
			continue
		}
		v, err := json.Marshal(h.Metadata[k])
		if err != nil {
			continue
		}
		b = append(jsonenc.AppendString(append(b, ','), k), ':')
		b = append(b, v...)
	}
	return b
}

// MarshalJSON writes agentName and sessionId, then the halt's members.
func (m replyMetadata) MarshalJSON() ([]byte, error) {
	type plain replyMetadata
	b, err := json.Marshal(plain(m))
	if err != nil || len(m.halt) == 0 {
		return b, err
	}
	return append(append(b[:len(b)-1], m.halt...), '}'), nil
}
