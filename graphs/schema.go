package graphs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// JSON Schemas are written in YAML but sent to models as JSON. They are
// converted from the node tree, not from a decoded map, so that properties
// keep the order the config wrote them in: models see them in that order,
// and routing notes list handoff arguments in it.

// maxSchemaNodes bounds the conversion, so that a schema built from nested
// aliases cannot expand without limit.
const maxSchemaNodes = 100000

// schemaURL is where a schema being compiled lives. Each compile uses a fresh
// compiler, so the same URL never clashes.
const schemaURL = "mem://switchboard/schema.json"

// Defaults of docs/config.md.
const (
	defaultToolParameters = `{"type":"object","properties":{}}`
	defaultHandoffSchema  = `{"type":"object","properties":{"reason":{"type":"string"}}}`
)

// compiledSchema is a JSON Schema ready for use.
type compiledSchema struct {
	// JSON is the schema, compact, with keys in config order.
	JSON json.RawMessage
	// Schema validates instances.
	Schema *jsonschema.Schema
	// Properties lists the top-level property names in config order.
	Properties []string
}

// compileSchema converts a schema node (or def when the node is absent) and
// compiles it. A schema must be a mapping: models are offered object
// schemas, and `true` or `false` would say nothing useful.
func compileSchema(n *yaml.Node, def string) (*compiledSchema, error) {
	n = deref(n)
	if n == nil || isNull(n) {
		return compileJSON([]byte(def))
	}
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("want a mapping, got %s (line %d)", describeNode(n), n.Line)
	}
	var buf bytes.Buffer
	budget := maxSchemaNodes
	if err := writeJSON(&buf, n, &budget); err != nil {
		return nil, err
	}
	var top struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(buf.Bytes(), &top) == nil && top.Type != nil && top.Type != "object" {
		// A model's call carries its arguments as a JSON object (OpenAI
		// refuses function parameters of another type): every call of
		// such a tool or handoff would fail invalid_args.
		return nil, fmt.Errorf("want an object schema (type: object), got type %v (line %d)", top.Type, n.Line)
	}
	return compileJSON(buf.Bytes())
}

// compileJSON compiles schema text.
func compileJSON(text []byte) (*compiledSchema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// No loader for any scheme: a schema in a config must be
	// self-contained, and compiling it must never touch files or network.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("add schema: %w", err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, schemaError(err)
	}
	return &compiledSchema{JSON: json.RawMessage(text), Schema: sch, Properties: jsonProperties(text)}, nil
}

// schemaError shortens a compile error to what the user wrote wrong: for a
// schema that breaks the metaschema, the innermost causes ("at
// '/properties/n/minimum': got string, want number") rather than the whole
// tree of 'allOf' failures around them.
func schemaError(err error) error {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		var leaves []string
		var walk func(*jsonschema.ValidationError)
		walk = func(e *jsonschema.ValidationError) {
			if len(e.Causes) == 0 {
				leaves = append(leaves, e.Error())
			}
			for _, c := range e.Causes {
				walk(c)
			}
		}
		walk(ve)
		return errors.New(strings.Join(leaves, "; "))
	}
	return errors.New(strings.ReplaceAll(err.Error(), schemaURL, "schema"))
}

// writeJSON writes node n as compact JSON, mappings in order.
func writeJSON(buf *bytes.Buffer, n *yaml.Node, budget *int) error {
	n = deref(n)
	if *budget--; *budget < 0 {
		return errors.New("schema is too large")
	}
	switch n.Kind {
	case yaml.MappingNode:
		buf.WriteByte('{')
		seen := map[string]bool{}
		for i, kv := range mappingPairs(n) {
			if seen[kv[0].Value] {
				return fmt.Errorf("line %d: key %q given twice", kv[0].Line, kv[0].Value)
			}
			seen[kv[0].Value] = true
			if i > 0 {
				buf.WriteByte(',')
			}
			key, err := json.Marshal(kv[0].Value)
			if err != nil {
				return fmt.Errorf("line %d: %w", kv[0].Line, err)
			}
			buf.Write(key)
			buf.WriteByte(':')
			if err := writeJSON(buf, kv[1], budget); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, c, budget); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, trimYAMLPrefix(err))
		}
		b, err := json.Marshal(v)
		if err != nil {
			// NaN and infinities have no JSON form.
			return fmt.Errorf("line %d: %q has no JSON form", n.Line, n.Value)
		}
		buf.Write(b)
	default:
		return fmt.Errorf("line %d: unexpected YAML node", n.Line)
	}
	return nil
}

// jsonProperties lists the keys of a schema's top-level `properties`, in the
// order the text has them; nil when there are none.
func jsonProperties(text []byte) []string {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(text, &top); err != nil {
		return nil
	}
	raw, ok := top["properties"]
	if !ok {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var props []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return props
		}
		key, _ := tok.(string)
		props = append(props, key)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return props
		}
	}
	return props
}
