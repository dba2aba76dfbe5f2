package graphs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ConfigError is returned for an invalid configuration. It lists every
// problem found, not only the first, so a user fixes them in one go.
type ConfigError struct {
	// Problems each start with "config invalid: " and name the agent,
	// handoff, tool or setting at fault.
	Problems []string
	// StoreURL is the store's URL as the config (or its environment
	// override) gave it, which graphs does not check: the caller that
	// knows the stores adds its problems to the others (all are reported
	// together).
	StoreURL string
}

// Error joins the problems, one per line.
func (e *ConfigError) Error() string { return strings.Join(e.Problems, "\n") }

// problemPrefix starts every problem line, as docs/config.md promises.
const problemPrefix = "config invalid: "

// problems collects the problems of one load.
type problems struct{ lines []string }

// addf records one problem. Newlines are flattened so that each problem
// stays on one line even when it quotes a multi-line library error.
func (p *problems) addf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
	p.lines = append(p.lines, problemPrefix+msg)
}

// err returns the collected problems as a *ConfigError, or nil.
func (p *problems) err() error {
	if len(p.lines) == 0 {
		return nil
	}
	return &ConfigError{Problems: p.lines}
}

// LoadFile reads and compiles a config file. builtin are the built-in
// providers, which the file's `providers:` entries override field by field.
// getenv resolves ${VAR} and the environment overrides (os.Getenv in
// production). An invalid config yields a *ConfigError.
func LoadFile(path string, builtin map[string]Provider, getenv func(string) string) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(data, builtin, getenv)
}

// Parse is LoadFile on the bytes of a config file.
func Parse(data []byte, builtin map[string]Provider, getenv func(string) string) (*Set, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	var p problems
	root, err := parseDocument(data)
	if err != nil {
		p.addf("%v", err)
		return nil, p.err()
	}
	substitute(root, getenv)

	var raw rawConfig
	decodeStrict(root, &raw, "", &p)
	applyEnvOverrides(&raw, getenv)
	set := compile(&raw, builtin, &p)
	if len(p.lines) > 0 {
		return nil, &ConfigError{Problems: p.lines, StoreURL: raw.Store.URL}
	}
	return set, nil
}

// parseDocument parses the single YAML document of a config file into a
// node tree. An empty file yields an empty mapping, which then fails
// validation for having no graphs.
func parseDocument(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}, nil
		}
		return nil, fmt.Errorf("yaml: %w", trimYAMLPrefix(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("yaml: a config file holds one document; found a second one (---)")
	}
	// Decoding into an untyped value applies the library's guard against
	// alias bombs before any of our walks expand aliases. Type problems
	// (duplicate keys) are left to checkShape, which names them better.
	var te *yaml.TypeError
	if err := doc.Decode(new(any)); err != nil && !errors.As(err, &te) {
		return nil, fmt.Errorf("yaml: %w", trimYAMLPrefix(err))
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: the config must be a mapping of sections (server, agents, graphs, ...)", root.Line)
	}
	return root, nil
}

// trimYAMLPrefix drops the "yaml: " the library puts on its own errors, so
// that ours does not say it twice.
func trimYAMLPrefix(err error) error {
	msg := err.Error()
	if after, ok := strings.CutPrefix(msg, "yaml: "); ok {
		return errors.New(after)
	}
	return err
}

// varPattern matches ${NAME}.
var varPattern = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// substitute replaces ${VAR} in every scalar value of the tree. It works on
// parsed scalars, never on the text, so an environment value can never add
// YAML structure, and a substituted value is always a string (integer and
// boolean settings accept a string that spells one; see checkShape). Mapping
// keys are left alone: they are names, not settings.
func substitute(root *yaml.Node, getenv func(string) string) {
	seen := map[*yaml.Node]bool{}
	var walk func(n *yaml.Node, isKey bool)
	walk = func(n *yaml.Node, isKey bool) {
		// Aliases share their anchor's node: substituting twice would
		// expand a ${...} that came from an environment value.
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		switch n.Kind {
		case yaml.ScalarNode:
			if isKey || !strings.Contains(n.Value, "${") {
				return
			}
			v := varPattern.ReplaceAllStringFunc(n.Value, func(m string) string {
				return getenv(m[2 : len(m)-1])
			})
			if v == n.Value {
				return
			}
			n.Value = v
		case yaml.MappingNode:
			for i, c := range n.Content {
				walk(c, i%2 == 0)
			}
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, false)
			}
		}
	}
	walk(root, false)
}

// applyEnvOverrides lets the environment win over the file (docs/config.md).
// An empty variable counts as unset.
func applyEnvOverrides(raw *rawConfig, getenv func(string) string) {
	overrides := []struct {
		env string
		dst *string
	}{
		{"SWITCHBOARD_LISTEN", &raw.Server.Listen},
		{"SWITCHBOARD_STORE_URL", &raw.Store.URL},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", &raw.Telemetry.OTLPEndpoint},
		{"OTEL_SERVICE_NAME", &raw.Telemetry.ServiceName},
	}
	for _, o := range overrides {
		if v := getenv(o.env); v != "" {
			*o.dst = v
		}
	}
}
