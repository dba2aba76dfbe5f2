package openapicheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The Responses API (POST /v1/responses, GET /v1/responses/{id}) is judged
// by OpenAI's `Response` and `ResponseStreamEvent` and, when its
// description is beside OpenAI's, by the Open Responses specification's
// `ResponseResource` and streaming events. Switchboard's own extension
// items and events (type `switchboard:...`, opt-in) are in neither
// description: they are left out before judging, and the tests that ask
// for them check them by hand.

// openResponsesFile is the Open Responses description, beside OpenAI's.
const openResponsesFile = "open-responses-openapi.json"

// The Open Responses description's schemas.
const (
	OpenResponse            Kind = "ResponseResource"
	OpenResponseStreamEvent Kind = "StreamEvent" // the union its POST /responses streams
)

// LoadOpenResponses compiles the Open Responses description at path.
func LoadOpenResponses(path string) (*Checker, error) {
	return load(path, []Kind{OpenResponse, OpenResponseStreamEvent}, map[Kind]string{
		OpenResponseStreamEvent: "/paths/~1responses/post/responses/200/content/text~1event-stream/schema",
	}, fixJSONSchemaFormat)
}

// fixJSONSchemaFormat corrects a defect of the description's copy: its
// JsonSchemaResponseFormat (a response's text.format of type json_schema)
// admits only null as `schema`, where the specification's source admits an
// object or null, and OpenAI's Response requires an object there, so no
// echoed json_schema format could satisfy both descriptions.
func fixJSONSchemaFormat(defs map[string]any) error {
	f, _ := defs["JsonSchemaResponseFormat"].(map[string]any)
	props, _ := f["properties"].(map[string]any)
	if props == nil || props["schema"] == nil {
		return errors.New("no JsonSchemaResponseFormat.properties.schema to correct")
	}
	props["schema"] = map[string]any{"anyOf": []any{map[string]any{"type": "object"}, map[string]any{"type": "null"}}}
	return nil
}

// checkResponse judges one response.
func (c *Checker) checkResponse(body []byte) (int, error) {
	doc, err := withoutExtensionItems(body)
	if err != nil {
		return 1, fmt.Errorf("response: %w", err)
	}
	if err := c.Validate(Response, withoutContractReason(doc)); err != nil {
		return 1, err
	}
	if c.open == nil {
		return 1, nil
	}
	return 2, c.open.Validate(OpenResponse, doc)
}

// checkResponseStream judges each event of a Responses stream: its SSE
// `event:` must be its type, its sequence_number its place from first (0
// but for a stream retrieved with starting_after), and the stream ends
// with the literal [DONE] (Open Responses' terminal event).
func (c *Checker) checkResponseStream(body []byte, first int) (int, error) {
	n, seq := 0, first
	var name string
	done := false
	for _, line := range strings.Split(string(body), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if v, ok := strings.CutPrefix(line, "event:"); ok {
			name = strings.TrimPrefix(v, " ")
			continue
		}
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		data = strings.TrimPrefix(data, " ")
		if done {
			return n, fmt.Errorf("response stream: an event after [DONE]: %s", clip([]byte(data)))
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var ev struct {
			Type string `json:"type"`
			Seq  *int   `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return n, fmt.Errorf("response stream event %d is not JSON: %s", seq, clip([]byte(data)))
		}
		if ev.Type != name || ev.Seq == nil || *ev.Seq != seq {
			return n, fmt.Errorf("response stream event %d: event %q, type %q, sequence_number %v", seq, name, ev.Type, ev.Seq)
		}
		seq++
		if strings.HasPrefix(ev.Type, "switchboard:") {
			continue
		}
		doc, skip, err := standardEvent([]byte(data))
		if err != nil {
			return n, fmt.Errorf("response stream event %d: %w", seq-1, err)
		}
		if skip {
			continue
		}
		n++
		if err := c.Validate(ResponseStreamEvent, withoutContractReason(doc)); err != nil {
			return n, fmt.Errorf("response stream event %d: %w", seq-1, err)
		}
		if c.open != nil {
			n++
			if err := c.open.Validate(OpenResponseStreamEvent, doc); err != nil {
				return n, fmt.Errorf("response stream event %d (Open Responses): %w", seq-1, err)
			}
		}
	}
	if seq == 0 {
		return 0, errors.New("response stream: no events")
	}
	if !done {
		return n, errors.New("response stream: no data: [DONE] after its last event")
	}
	return n, nil
}

// standardEvent returns an event without extension items in the response
// it carries; skip is set for an event about an extension item.
func standardEvent(data []byte) (doc []byte, skip bool, err error) {
	var ev map[string]json.RawMessage
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, false, err
	}
	if item, ok := ev["item"]; ok && isExtension(item) {
		return nil, true, nil
	}
	if resp, ok := ev["response"]; ok {
		if ev["response"], err = withoutExtensionItems(resp); err != nil {
			return nil, false, err
		}
		data, err = json.Marshal(ev)
	}
	return data, false, err
}

// withoutExtensionItems drops switchboard:* items from a response's output.
func withoutExtensionItems(body []byte) ([]byte, error) {
	var r map[string]json.RawMessage
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("not a JSON object: %s", clip(body))
	}
	var out []json.RawMessage
	if err := json.Unmarshal(r["output"], &out); err != nil {
		return body, nil // let the schema say what is wrong with it
	}
	kept := make([]json.RawMessage, 0, len(out))
	for _, it := range out {
		if !isExtension(it) {
			kept = append(kept, it)
		}
	}
	if len(kept) == len(out) {
		return body, nil
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return nil, err
	}
	r["output"] = b
	return json.Marshal(r)
}

// isExtension reports whether an item's type is one of Switchboard's.
func isExtension(item json.RawMessage) bool {
	var it struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(item, &it) == nil && strings.HasPrefix(it.Type, "switchboard:")
}

// rewriteRecursive turns draft 2019-09's $recursiveAnchor and
// $recursiveRef, which OpenAI's description uses for its recursive file
// search filters (reachable from Response) and a 2020-12 compiler refuses,
// into a $ref to the component itself.
func rewriteRecursive(defs map[string]any) {
	for name, s := range defs {
		m, ok := s.(map[string]any)
		if !ok {
			continue
		}
		if _, ok := m["$recursiveAnchor"]; !ok {
			continue
		}
		delete(m, "$recursiveAnchor")
		self := "#/components/schemas/" + name
		var walk func(v any)
		walk = func(v any) {
			switch x := v.(type) {
			case []any:
				for _, e := range x {
					walk(e)
				}
			case map[string]any:
				if _, ok := x["$recursiveRef"]; ok {
					delete(x, "$recursiveRef")
					x["$ref"] = self
				}
				for _, e := range x {
					walk(e)
				}
			}
		}
		walk(m)
	}
}

// pointer resolves a JSON pointer ("/a/b~1c") in doc.
func pointer(doc any, ptr string) (any, error) {
	cur := doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[tok]
			if !ok {
				return nil, fmt.Errorf("no %q in %s", tok, ptr)
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("no index %q in %s", tok, ptr)
			}
			cur = x[i]
		default:
			return nil, fmt.Errorf("%s leads into a scalar", ptr)
		}
	}
	return cur, nil
}
