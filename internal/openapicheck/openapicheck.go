// Package openapicheck judges the gateway's replies by OpenAI's published
// OpenAPI description (../shared/specs/openai-openapi.json from the
// repository root), not by what the project's own tests expect: a reply,
// an SSE chunk, an error or a model list that breaks the published schema
// fails the test that saw it. Fields the schema does not name (the
// gateway's `metadata` on chunks) are allowed, as the schema allows them;
// a field it requires and the gateway omits is a failure.
//
// The description is an OpenAPI 3.1 document that still uses the 3.0
// keyword `nullable: true`; Load rewrites it into a type that admits null
// before compiling, and leaves the `x-` keywords to be ignored.
package openapicheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Kind names a schema of the description that a body is checked against.
type Kind string

// The schemas the gateway's answers must satisfy.
const (
	ChatCompletion      Kind = "CreateChatCompletionResponse"
	ChatCompletionChunk Kind = "CreateChatCompletionStreamResponse"
	ErrorResponse       Kind = "ErrorResponse"
	ModelList           Kind = "ListModelsResponse"
	Model               Kind = "Model"
	Response            Kind = "Response"
	ResponseStreamEvent Kind = "ResponseStreamEvent"
	ResponseItemList    Kind = "ResponseItemList" // GET /v1/responses/{id}/input_items
)

// kinds is every Kind Load compiles.
var kinds = []Kind{ChatCompletion, ChatCompletionChunk, ErrorResponse, ModelList, Model, Response, ResponseStreamEvent, ResponseItemList}

// specFile is the description's place relative to the repository root.
const specFile = "../shared/specs/openai-openapi.json"

// mainModule is the first line of the repository root's go.mod.
const mainModule = "module github.com/switchboard-ai/switchboard\n"

// ErrNoSpec is returned when the description cannot be found.
var ErrNoSpec = errors.New("openapicheck: the OpenAI OpenAPI description was not found")

// Checker validates bodies against the compiled schemas. It is safe for
// concurrent use.
type Checker struct {
	schemas map[Kind]*jsonschema.Schema
	// open, when set, judges the Responses API replies a second time, by
	// the Open Responses description (responses.go).
	open *Checker
}

// SpecPath finds the description: ../shared/specs/openai-openapi.json
// from the repository root, the nearest directory above the working
// directory whose go.mod is the main module's (so that the nested e2e
// modules find it too).
func SpecPath() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("openapicheck: %w", err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte(mainModule)) {
			p := filepath.Join(dir, filepath.FromSlash(specFile))
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("%w at %s: %v", ErrNoSpec, p, err)
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w: no repository root (a go.mod starting %q) above the working directory", ErrNoSpec, strings.TrimSpace(mainModule))
		}
		dir = parent
	}
}

// Load reads the description at path, rewrites `nullable`, and compiles
// the schemas of every Kind.
func Load(path string) (*Checker, error) {
	return load(path, kinds, nil, nil)
}

// load compiles the schemas of ks from the description at path; extra
// adds schemas under components.schemas, taken from elsewhere in the
// description (extra maps their name to a JSON pointer); fix, when set,
// corrects known defects of the description's components.schemas.
func load(path string, ks []Kind, extra map[Kind]string, fix func(defs map[string]any) error) (*Checker, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("openapicheck: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("openapicheck: %s: %w", path, err)
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("openapicheck: %s is not a JSON object", path)
	}
	components, _ := root["components"].(map[string]any)
	defs, _ := components["schemas"].(map[string]any)
	if defs == nil {
		return nil, fmt.Errorf("openapicheck: %s has no components.schemas", path)
	}
	// Only the schemas are compiled, as one JSON Schema document whose
	// root holds them where the description's references point.
	defs = rewriteNullable(defs).(map[string]any)
	rewriteRecursive(defs)
	if fix != nil {
		if err := fix(defs); err != nil {
			return nil, fmt.Errorf("openapicheck: %s: %w", path, err)
		}
	}
	for name, ptr := range extra {
		v, err := pointer(root, ptr)
		if err != nil {
			return nil, fmt.Errorf("openapicheck: %s: %w", path, err)
		}
		defs[string(name)] = rewriteNullable(v)
	}
	schemaDoc := map[string]any{"components": map[string]any{"schemas": defs}}
	const url = "https://switchboard.invalid/openai-openapi.json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(url, schemaDoc); err != nil {
		return nil, fmt.Errorf("openapicheck: %w", err)
	}
	ch := &Checker{schemas: make(map[Kind]*jsonschema.Schema, len(ks))}
	for _, k := range ks {
		s, err := c.Compile(url + "#/components/schemas/" + string(k))
		if err != nil {
			return nil, fmt.Errorf("openapicheck: compile %s: %w", k, err)
		}
		ch.schemas[k] = s
	}
	return ch, nil
}

// rewriteNullable returns v with every `nullable: true` turned into a
// schema that admits null, as OpenAPI 3.0 meant it: a type gains "null"
// (and an enum the null value); a schema without a type becomes
// anyOf [itself, {type: null}].
func rewriteNullable(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = rewriteNullable(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = rewriteNullable(e)
		}
		nullable, _ := out["nullable"].(bool)
		delete(out, "nullable")
		if !nullable {
			return out
		}
		switch t := out["type"].(type) {
		case string:
			out["type"] = []any{t, "null"}
		case []any:
			out["type"] = append(append([]any(nil), t...), "null")
		default:
			return map[string]any{"anyOf": []any{out, map[string]any{"type": "null"}}}
		}
		if enum, ok := out["enum"].([]any); ok {
			out["enum"] = append(append([]any(nil), enum...), nil)
		}
		return out
	default:
		return v
	}
}

// Validate checks one JSON body against the schema of kind.
func (c *Checker) Validate(kind Kind, body []byte) error {
	s, ok := c.schemas[kind]
	if !ok {
		return fmt.Errorf("openapicheck: unknown kind %q", kind)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: the body is not JSON: %w", kind, err)
	}
	if err := s.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			// %#v lists every failed keyword with its place in the body.
			return fmt.Errorf("%s: %#v\nbody: %s", kind, ve, clip(body))
		}
		return fmt.Errorf("%s: %w\nbody: %s", kind, err, clip(body))
	}
	return nil
}

// clip shortens a body for an error message.
func clip(b []byte) string {
	const max = 2000
	if len(b) <= max {
		return string(b)
	}
	return string(b[:max]) + "..."
}

// CheckReply validates what the gateway answered to method path: an error
// status's body as an ErrorResponse; a chat completion, each chunk of a
// chat completion stream (an error event as an ErrorResponse), a
// Responses API response and each event of its stream (responses.go) and
// the models routes by their schemas. Other routes' successes (sessions,
// health) are not in the description and pass unchecked, as do the bodiless
// replies to HEAD. It returns how many bodies it checked.
func (c *Checker) CheckReply(method, path string, status int, contentType string, body []byte) (int, error) {
	path, rawQuery, _ := strings.Cut(path, "?")
	if !strings.HasPrefix(path, "/v1/") || method == "HEAD" { // a HEAD reply has no body
		return 0, nil
	}
	if status >= 400 {
		return 1, c.Validate(ErrorResponse, body)
	}
	switch {
	case status != 200:
		return 0, nil
	case method == "POST" && path == "/v1/chat/completions" && strings.HasPrefix(contentType, "text/event-stream"):
		return c.checkStream(body)
	case method == "POST" && path == "/v1/chat/completions":
		return 1, c.Validate(ChatCompletion, withoutContractMetadata(body))
	case method == "GET" && path == "/v1/models":
		return 1, c.Validate(ModelList, body)
	case method == "GET" && strings.HasPrefix(path, "/v1/models/"):
		return 1, c.Validate(Model, body)
	case method == "POST" && path == "/v1/responses" && strings.HasPrefix(contentType, "text/event-stream"):
		return c.checkResponseStream(body, 0)
	case method == "GET" && strings.HasPrefix(path, "/v1/responses/") && strings.HasPrefix(contentType, "text/event-stream"):
		// A stored response's stream, replayed after starting_after.
		first := 0
		if q, err := url.ParseQuery(rawQuery); err == nil && q.Has("starting_after") {
			n, err := strconv.Atoi(q.Get("starting_after"))
			if err != nil {
				return 0, fmt.Errorf("starting_after %q", q.Get("starting_after"))
			}
			first = n + 1
		}
		return c.checkResponseStream(body, first)
	case method == "GET" && strings.HasPrefix(path, "/v1/responses/") && strings.HasSuffix(path, "/input_items"):
		return 1, c.Validate(ResponseItemList, body)
	case method == "POST" && path == "/v1/responses",
		method == "GET" && strings.HasPrefix(path, "/v1/responses/"):
		return c.checkResponse(body)
	}
	return 0, nil
}

// checkStream validates each data event of an SSE body up to [DONE],
// which must end it.
func (c *Checker) checkStream(body []byte) (int, error) {
	n, done := 0, false
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(strings.TrimSuffix(line, "\r"), "data:")
		if !ok {
			continue
		}
		data = strings.TrimPrefix(data, " ")
		if done {
			return n, fmt.Errorf("stream: an event after [DONE]: %s", clip([]byte(data)))
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		kind := ChatCompletionChunk
		if isError([]byte(data)) {
			kind = ErrorResponse
		}
		n++
		if err := c.Validate(kind, withoutContractMetadata([]byte(data))); err != nil {
			return n, fmt.Errorf("stream event %d: %w", n, err)
		}
	}
	if !done {
		return n, errors.New("stream: no data: [DONE]")
	}
	return n, nil
}

// isError reports whether a stream event is an error object.
func isError(data []byte) bool {
	var probe struct {
		Error json.RawMessage `json:"error"`
	}
	return json.Unmarshal(data, &probe) == nil && probe.Error != nil
}
