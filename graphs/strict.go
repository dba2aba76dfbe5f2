package graphs

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The YAML library rejects unknown keys only through yaml.Decoder, which
// would mean decoding the text again after ${VAR} substitution. Instead the
// substituted node tree is checked against the raw structs here, which also
// lets each problem name where in the config it is ("agents.triage"), not
// only a line number.

// nodeType is the type of the raw fields the compiler interprets itself.
var nodeType = reflect.TypeFor[yaml.Node]()

// decodeStrict decodes n into v (a pointer to a raw struct), reporting
// unknown keys, duplicate keys and values of the wrong shape as problems
// under path. What is malformed is left at its zero value.
func decodeStrict(n *yaml.Node, v any, path string, p *problems) {
	checkShape(n, reflect.TypeOf(v).Elem(), path, p)
	if err := n.Decode(v); err != nil {
		// Not expected once checkShape has neutralized what it reported;
		// reported rather than lost all the same.
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, e := range te.Errors {
				p.addf("%s: %s", orTop(path), e)
			}
		} else {
			p.addf("%s: %v", orTop(path), trimYAMLPrefix(err))
		}
	}
}

// checkShape reports every place where n does not fit type t.
func checkShape(n *yaml.Node, t reflect.Type, path string, p *problems) {
	n = deref(n)
	if n == nil || t == nodeType || isNull(n) {
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		checkShape(n, t.Elem(), path, p)
	case reflect.Struct:
		if !wantKind(n, yaml.MappingNode, path, p) {
			return
		}
		dropDuplicates(n, path, p)
		fields := yamlFields(t)
		for _, kv := range mappingPairs(n) {
			key, val := kv[0], kv[1]
			f, ok := fields[key.Value]
			if !ok {
				// Left in place: decoding skips unknown keys.
				p.addf("%s: unknown key %q (line %d); known keys: %s", orTop(path), key.Value, key.Line, fieldNames(t))
				continue
			}
			checkShape(val, f, join(path, key.Value), p)
		}
	case reflect.Map:
		if !wantKind(n, yaml.MappingNode, path, p) {
			return
		}
		dropDuplicates(n, path, p)
		for _, kv := range mappingPairs(n) {
			checkShape(kv[1], t.Elem(), join(path, kv[0].Value), p)
		}
	case reflect.Slice:
		if !wantKind(n, yaml.SequenceNode, path, p) {
			return
		}
		for i, c := range n.Content {
			checkShape(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), p)
		}
	case reflect.String:
		wantKind(n, yaml.ScalarNode, path, p)
	case reflect.Int, reflect.Int64:
		if wantKind(n, yaml.ScalarNode, path, p) && !retag(n, "!!int") {
			p.addf("%s: want an integer, got %q (line %d)", path, n.Value, n.Line)
			setNull(n)
		}
	case reflect.Float32, reflect.Float64:
		if wantKind(n, yaml.ScalarNode, path, p) && !retag(n, "!!float") {
			p.addf("%s: want a number, got %q (line %d)", path, n.Value, n.Line)
			setNull(n)
		}
	case reflect.Bool:
		if wantKind(n, yaml.ScalarNode, path, p) && !retag(n, "!!bool") {
			p.addf("%s: want true or false, got %q (line %d)", path, n.Value, n.Line)
			setNull(n)
		}
	}
}

// retag reports whether scalar n is of type tag, or is a string that spells
// one, which it then retags so that it decodes as one. That lets
// `max_steps: ${MAX_STEPS}` work, and `max_steps: "20"` with it.
func retag(n *yaml.Node, tag string) bool {
	if n.ShortTag() == tag || (tag == "!!float" && n.ShortTag() == "!!int") {
		return true // an integer is a number too
	}
	if n.ShortTag() != "!!str" {
		return false
	}
	var ok bool
	switch tag {
	case "!!int":
		_, err := strconv.ParseInt(n.Value, 10, 64)
		ok = err == nil
	case "!!float":
		f, err := strconv.ParseFloat(n.Value, 64)
		ok = err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
	case "!!bool":
		ok = n.Value == "true" || n.Value == "false"
	}
	if ok {
		n.Tag = tag
	}
	return ok
}

// wantKind reports a problem unless n is of kind k.
func wantKind(n *yaml.Node, k yaml.Kind, path string, p *problems) bool {
	if n.Kind == k {
		return true
	}
	p.addf("%s: want %s, got %s (line %d)", orTop(path), kindName(k), describeNode(n), n.Line)
	setNull(n)
	return false
}

// setNull turns a value already reported as malformed into an absent one,
// so that decoding leaves the setting at its default and the compiler does
// not report it a second time in other words.
func setNull(n *yaml.Node) {
	*n = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: n.Line, Column: n.Column}
}

// dropDuplicates reports keys written twice in mapping n and drops all but
// the first, which decoding would otherwise refuse wholesale.
func dropDuplicates(n *yaml.Node, path string, p *problems) {
	seen := map[string]int{}
	kept := n.Content[:0:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := n.Content[i]
		if key.ShortTag() != "!!merge" {
			if line, dup := seen[key.Value]; dup {
				p.addf("%s: key %q given twice (lines %d and %d)", orTop(path), key.Value, line, key.Line)
				continue
			}
			seen[key.Value] = key.Line
		}
		kept = append(kept, key, n.Content[i+1])
	}
	n.Content = kept
}

// mappingPairs lists the key/value pairs of a mapping, with YAML merge keys
// (`<<: *base`) expanded so that merged keys are checked too. As in YAML,
// a key written in the mapping wins over a merged one, and an earlier merge
// wins over a later one; merged pairs come after the written ones.
func mappingPairs(n *yaml.Node) [][2]*yaml.Node {
	var pairs, merged [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if key.ShortTag() != "!!merge" {
			pairs = append(pairs, [2]*yaml.Node{key, val})
			continue
		}
		val = deref(val)
		sources := []*yaml.Node{val}
		if val.Kind == yaml.SequenceNode {
			sources = val.Content
		}
		for _, m := range sources {
			if m = deref(m); m.Kind == yaml.MappingNode {
				merged = append(merged, mappingPairs(m)...)
			}
		}
	}
	if len(merged) == 0 {
		return pairs
	}
	have := map[string]bool{}
	for _, kv := range pairs {
		have[kv[0].Value] = true
	}
	for _, kv := range merged {
		if !have[kv[0].Value] {
			have[kv[0].Value] = true
			pairs = append(pairs, kv)
		}
	}
	return pairs
}

// deref follows aliases to the anchored node.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// isNull reports an absent value (`key:` or `key: ~`), which leaves the
// field at its default.
func isNull(n *yaml.Node) bool {
	return n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// yamlFields maps the yaml keys of struct t to their field types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for f := range t.Fields() {
		if name := yamlName(f); name != "" {
			fields[name] = f.Type
		}
	}
	return fields
}

// fieldNames lists the yaml keys of struct t in declaration order.
func fieldNames(t reflect.Type) string {
	var names []string
	for f := range t.Fields() {
		if name := yamlName(f); name != "" {
			names = append(names, name)
		}
	}
	return strings.Join(names, ", ")
}

// yamlName is the key of a struct field, "" when it has none.
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" {
		return ""
	}
	return name
}

// kindName names a node kind for a problem.
func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return "a single value"
	}
}

// describeNode names what a node is for a problem.
func describeNode(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return fmt.Sprintf("%q", n.Value)
	}
	return kindName(n.Kind)
}

// join appends a key to a dotted path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// orTop names the top of the file when path is empty.
func orTop(path string) string {
	if path == "" {
		return "config"
	}
	return path
}
