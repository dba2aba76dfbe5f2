// Package apispec validates JSON against the published API schemas that
// sit beside the project in ../shared/specs/ (OpenAI's OpenAPI description
// and the Open Responses one), for tests: what a client of those APIs
// expects is checked against what the client's vendor published, not
// against a reading of it.
package apispec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The published descriptions.
const (
	OpenAI        = "openai-openapi.json"
	OpenResponses = "open-responses-openapi.json"
)

// Validator checks documents against the components of one description.
type Validator struct {
	file    string
	mu      sync.Mutex
	c       *jsonschema.Compiler
	schemas map[string]*jsonschema.Schema
}

// Load returns the validator for file (OpenAI or OpenResponses). When the
// specs folder is absent the test is skipped, or fails under CI=true. A
// Validator compiles the schemas it is asked for once; share it within a
// test.
func Load(tb testing.TB, file string) *Validator {
	tb.Helper()
	path, err := find(file)
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("apispec: %v", err)
		}
		tb.Skipf("apispec: %v", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("apispec: %v", err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		tb.Fatalf("apispec: %s: %v", file, err)
	}
	doc = fixNullable(doc)
	fixRecursive(doc)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("mem://"+file, doc); err != nil {
		tb.Fatalf("apispec: %s: %v", file, err)
	}
	return &Validator{file: file, c: c, schemas: map[string]*jsonschema.Schema{}}
}

// find looks for ../shared/specs/file from the working directory up.
func find(file string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "..", "shared", "specs", file)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s not found in ../shared/specs/ above the working directory", file)
		}
		dir = parent
	}
}

// fixNullable rewrites OpenAPI 3.0's `nullable: true`, which JSON Schema
// ignores, into a schema that admits null.
func fixNullable(v any) any {
	switch x := v.(type) {
	case []any:
		for i := range x {
			x[i] = fixNullable(x[i])
		}
		return x
	case map[string]any:
		for k := range x {
			x[k] = fixNullable(x[k])
		}
		if n, ok := x["nullable"].(bool); ok {
			delete(x, "nullable")
			if n {
				if t, ok := x["type"].(string); ok {
					x["type"] = []any{t, "null"}
					if enum, ok := x["enum"].([]any); ok {
						x["enum"] = append(enum, nil)
					}
				} else {
					return map[string]any{"anyOf": []any{x, map[string]any{"type": "null"}}}
				}
			}
		}
		return x
	default:
		return v
	}
}

// fixRecursive rewrites draft 2019-09's $recursiveAnchor and
// $recursiveRef, which OpenAI's description uses for its recursive filters
// and a 2020-12 compiler refuses, into a $ref to the component itself.
func fixRecursive(doc any) {
	comps, _ := doc.(map[string]any)["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	for name, s := range schemas {
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

// Validate checks the JSON document doc against a schema of the
// description and returns what does not match: name is a component schema
// (e.g. "Response") or a JSON pointer into the description ("#/paths/...").
func (v *Validator) Validate(name string, doc []byte) error {
	v.mu.Lock()
	s, ok := v.schemas[name]
	if !ok {
		ref := name
		if !strings.HasPrefix(ref, "#/") {
			ref = "#/components/schemas/" + name
		}
		var err error
		s, err = v.c.Compile("mem://" + v.file + ref)
		if err != nil {
			v.mu.Unlock()
			return fmt.Errorf("compile %s: %w", name, err)
		}
		v.schemas[name] = s
	}
	v.mu.Unlock()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := s.Validate(inst); err != nil {
		return fmt.Errorf("%s %s: %w", v.file, name, err)
	}
	return nil
}

// OpenResponsesStreamEvent is the Open Responses description's schema of
// one streamed event (the union its POST /responses declares).
const OpenResponsesStreamEvent = "#/paths/~1responses/post/responses/200/content/text~1event-stream/schema"

// Check fails the test when doc does not match the schema name.
func (v *Validator) Check(tb testing.TB, name string, doc []byte) {
	tb.Helper()
	if err := v.Validate(name, doc); err != nil {
		tb.Errorf("%v\ndocument: %s", err, doc)
	}
}
