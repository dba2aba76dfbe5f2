// Command kubeschema validates Kubernetes manifests (the output of `helm
// template`) against the API schemas of a Kubernetes release: the
// OpenAPI v2 document (api/openapi-spec/swagger.json) that the
// k8s.io/kubernetes Go module ships, so that no schema is fetched from
// the internet. It checks as kubeconform -strict does: every object must
// be a known apiVersion/kind, required fields must be there, types must
// match, and a field the schema does not name is an error.
//
//	kubeschema -swagger swagger.json [-crd CRD.yaml]... [-skip Kind,...] [-configmap-dir DIR] [FILE...]
//
// -crd adds the kinds a CustomResourceDefinition defines (its
// openAPIV3Schema, made strict alike), e.g. the Prometheus Operator's
// ServiceMonitor from the prometheus-operator Go module.
// With no FILE it reads standard input. -configmap-dir writes the data of
// every ConfigMap there, one file per key, so that a script can check the
// rendered gateway config with `switchboard validate`.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

func main() {
	swagger := flag.String("swagger", "", "Kubernetes OpenAPI v2 document (swagger.json)")
	skip := flag.String("skip", "", "comma-separated kinds that have no schema here and are only reported")
	cmDir := flag.String("configmap-dir", "", "write every ConfigMap's data here, one file per key")
	var crds []string
	flag.Func("crd", "a CustomResourceDefinition whose kinds to validate too (repeatable)", func(f string) error {
		crds = append(crds, f)
		return nil
	})
	flag.Parse()
	if *swagger == "" {
		fmt.Fprintln(os.Stderr, "kubeschema: -swagger is required")
		os.Exit(2)
	}
	v, err := load(*swagger)
	for _, f := range crds {
		if err == nil {
			err = v.addCRD(f)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeschema:", err)
		os.Exit(2)
	}
	var skipKinds []string
	if *skip != "" {
		skipKinds = strings.Split(*skip, ",")
	}
	var inputs []io.Reader
	for _, f := range flag.Args() {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kubeschema:", err)
			os.Exit(2)
		}
		inputs = append(inputs, bytes.NewReader(b))
	}
	if len(inputs) == 0 {
		inputs = append(inputs, os.Stdin)
	}
	failed := false
	for _, in := range inputs {
		if !v.check(in, os.Stdout, skipKinds, *cmDir) {
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// validator holds the compiled schema of each kind.
type validator struct {
	compiler *jsonschema.Compiler
	byGVK    map[string]string // "apps/v1 Deployment" -> definition name
	compiled map[string]*jsonschema.Schema
}

const docURL = "file:///kubernetes/swagger.json"

// load reads the swagger document and makes its definitions strict.
func load(path string) (*validator, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(doc.Definitions) == 0 {
		return nil, fmt.Errorf("%s: no definitions", path)
	}
	v := &validator{byGVK: map[string]string{}, compiled: map[string]*jsonschema.Schema{}}
	defs := map[string]any{}
	for name, def := range doc.Definitions {
		if gvks, ok := def["x-kubernetes-group-version-kind"].([]any); ok {
			for _, g := range gvks {
				m, _ := g.(map[string]any)
				v.byGVK[gvk(str(m["group"]), str(m["version"]), str(m["kind"]))] = name
			}
		}
		defs[name] = def
	}
	patch(defs)
	raw, err := json.Marshal(map[string]any{"definitions": defs})
	if err != nil {
		return nil, err
	}
	parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	if err := c.AddResource(docURL, parsed); err != nil {
		return nil, err
	}
	v.compiler = c
	return v, nil
}

// patch turns the OpenAPI definitions into what the API server accepts:
// int-or-string and quantities take a number or a string, and an object
// with named properties takes no other (the API server drops unknown
// fields, which hides typos; kubeconform -strict refuses them too).
func patch(defs map[string]any) {
	either := func(def map[string]any, other string) {
		delete(def, "type")
		delete(def, "format")
		def["oneOf"] = []any{map[string]any{"type": "string"}, map[string]any{"type": other}}
	}
	for name, d := range defs {
		def := d.(map[string]any)
		switch name {
		case "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
			either(def, "integer")
		case "io.k8s.apimachinery.pkg.api.resource.Quantity":
			either(def, "number")
		}
		strict(def)
	}
}

// strict forbids properties an object schema does not name, throughout.
func strict(s map[string]any) {
	if props, ok := s["properties"].(map[string]any); ok {
		if _, set := s["additionalProperties"]; !set && s["x-kubernetes-preserve-unknown-fields"] != true {
			s["additionalProperties"] = false
		}
		for _, p := range props {
			if m, ok := p.(map[string]any); ok {
				strict(m)
			}
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if m, ok := s[k].(map[string]any); ok {
			strict(m)
		}
	}
}

// schema compiles (once) the schema of apiVersion/kind.
func (v *validator) schema(apiVersion, kind string) (*jsonschema.Schema, error) {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		group, version = "", apiVersion
	}
	name, ok := v.byGVK[gvk(group, version, kind)]
	if !ok {
		return nil, errNoSchema
	}
	if s := v.compiled[name]; s != nil {
		return s, nil
	}
	url := docURL + "#/definitions/" + jsonPointerEscape(name)
	if strings.HasPrefix(name, crdURL) {
		url = name
	}
	s, err := v.compiler.Compile(url)
	if err != nil {
		return nil, err
	}
	v.compiled[name] = s
	return s, nil
}

const crdURL = "file:///crd/"

// addCRD registers the kinds of a CustomResourceDefinition file.
func (v *validator) addCRD(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd struct {
		Spec struct {
			Group string `yaml:"group"`
			Names struct {
				Kind string `yaml:"kind"`
			} `yaml:"names"`
			Versions []struct {
				Name   string `yaml:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
				} `yaml:"schema"`
			} `yaml:"versions"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, ver := range crd.Spec.Versions {
		s := ver.Schema.OpenAPIV3Schema
		if s == nil {
			continue
		}
		strict(s)
		raw, err := json.Marshal(s)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		url := crdURL + crd.Spec.Group + "/" + ver.Name + "/" + crd.Spec.Names.Kind + ".json"
		if err := v.compiler.AddResource(url, doc); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		v.byGVK[gvk(crd.Spec.Group, ver.Name, crd.Spec.Names.Kind)] = url
	}
	if crd.Spec.Names.Kind == "" {
		return fmt.Errorf("%s: not a CustomResourceDefinition", path)
	}
	return nil
}

var errNoSchema = errors.New("no schema for this apiVersion and kind")

// check validates every document of in, printing one line per object, and
// reports whether all passed.
func (v *validator) check(in io.Reader, out io.Writer, skip []string, cmDir string) bool {
	dec := yaml.NewDecoder(in)
	ok, n := true, 0
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Fprintf(out, "FAIL document %d: not YAML: %v\n", n+1, err)
			return false
		}
		if obj == nil {
			continue // an empty document between separators
		}
		n++
		apiVersion, kind := str(obj["apiVersion"]), str(obj["kind"])
		name := kind + "/" + str(mapOf(obj["metadata"])["name"])
		if slices.Contains(skip, kind) {
			fmt.Fprintf(out, "skip %s (%s): no schema in the Kubernetes API for this kind\n", name, apiVersion)
			continue
		}
		s, err := v.schema(apiVersion, kind)
		if err != nil {
			fmt.Fprintf(out, "FAIL %s (%s): %v\n", name, apiVersion, err)
			ok = false
			continue
		}
		// Through JSON, so that YAML's integers and maps take JSON's types.
		b, err := json.Marshal(obj)
		if err == nil {
			var inst any
			inst, err = jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err == nil {
				err = s.Validate(inst)
			}
		}
		if err != nil {
			fmt.Fprintf(out, "FAIL %s (%s): %v\n", name, apiVersion, err)
			ok = false
			continue
		}
		fmt.Fprintf(out, "ok   %s (%s)\n", name, apiVersion)
		if kind == "ConfigMap" && cmDir != "" {
			for k, val := range mapOf(obj["data"]) {
				if err := os.WriteFile(filepath.Join(cmDir, filepath.Base(k)), []byte(str(val)), 0o600); err != nil {
					fmt.Fprintf(out, "FAIL %s: write %s: %v\n", name, k, err)
					ok = false
				}
			}
		}
	}
	if n == 0 {
		fmt.Fprintln(out, "FAIL no objects")
		return false
	}
	return ok
}

func gvk(group, version, kind string) string { return group + "/" + version + " " + kind }

func str(v any) string {
	s, _ := v.(string)
	return s
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// jsonPointerEscape escapes a definition name for a JSON pointer.
func jsonPointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
