package openapicheck

import "encoding/json"

// contractMetadata lists the members of a chat completion's metadata that
// the contract requires as objects or arrays where OpenAI's Metadata admits
// strings only: metadata.guardrail of a run a guardrail stopped (README,
// Guardrails), and metadata.approvals of a run paused for approvals
// (docs/permissions.md). The deviation is the contract's; the gateway's own tests
// check those members, and the rest of the reply is still judged by the
// published schema.
var contractMetadata = []string{"guardrail", "approvals"}

// withoutContractMetadata returns body without the contractMetadata
// members of its metadata, or body itself when it has none.
func withoutContractMetadata(body []byte) []byte {
	var reply map[string]json.RawMessage
	if json.Unmarshal(body, &reply) != nil || reply["metadata"] == nil {
		return body
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(reply["metadata"], &meta) != nil {
		return body
	}
	changed := false
	for _, k := range contractMetadata {
		if v, ok := meta[k]; ok && len(v) > 0 && (v[0] == '{' || v[0] == '[') {
			delete(meta, k)
			changed = true
		}
	}
	if !changed {
		return body
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return body
	}
	reply["metadata"] = m
	out, err := json.Marshal(reply)
	if err != nil {
		return body
	}
	return out
}

// contractReason is the incomplete_details.reason of a response paused for
// approvals (CONTRACT 10), which OpenAI's Response does not list (it knows
// max_output_tokens and content_filter); Open Responses admits any string.
const contractReason = "approval_required"

// withoutContractReason returns a response, or an event carrying one,
// without the reason of its incomplete_details when that is contractReason,
// so that the rest is judged by OpenAI's schema; body itself otherwise.
func withoutContractReason(body []byte) []byte {
	if out, ok := stripReason(body); ok {
		return out
	}
	return body
}

// stripReason does withoutContractReason's work and reports whether it
// changed anything.
func stripReason(body []byte) ([]byte, bool) {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return nil, false
	}
	if raw, ok := doc["response"]; ok { // a stream event
		resp, ok := stripReason(raw)
		if !ok {
			return nil, false
		}
		doc["response"] = resp
	} else {
		var details struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(doc["incomplete_details"], &details) != nil || details.Reason != contractReason {
			return nil, false
		}
		doc["incomplete_details"] = json.RawMessage(`{}`)
	}
	out, err := json.Marshal(doc)
	return out, err == nil
}
