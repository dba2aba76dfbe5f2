// Package layering checks the project's layering as a test (in the spirit
// of tailscale's tstest/deptest): a package that imports what its layer
// must not fails the build's tests, not a reviewer's memory.
package layering

import (
	"go/build"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/switchboard-ai/switchboard"

// rule says what a package of the project must not import, directly or
// through other packages of the project.
type rule struct {
	pkg string
	// project lists forbidden project packages (and their subpackages).
	project []string
	// leaf forbids every project package.
	leaf bool
	// external lists forbidden import paths from outside the project
	// (and their subpackages), checked on the package's own imports.
	external []string
}

// rules is the layering of docs/architecture.md: runtime knows no HTTP,
// Redis or provider; the gateway knows no Redis or provider; graphs is a
// leaf that every package may use, and graphs/diagram reads graphs alone.
var rules = []rule{
	{
		pkg:      "runtime",
		project:  []string{"gateway", "cache", "providers", "webhooks", "mcptools", "internal/app"},
		external: []string{"net/http", "github.com/gin-gonic/gin", "github.com/redis/go-redis", "github.com/sashabaranov/go-openai"},
	},
	{
		pkg:      "gateway",
		project:  []string{"cache", "providers", "mcptools", "internal/app"},
		external: []string{"github.com/redis/go-redis", "github.com/sashabaranov/go-openai"},
	},
	{pkg: "graphs", leaf: true},
	// The diagram draws a compiled graph and needs nothing else.
	{
		pkg: "graphs/diagram",
		project: []string{"runtime", "gateway", "cache", "providers", "webhooks", "mcptools", "telemetry",
			"guardrails", "ratelimit", "internal", "cmd", "bench", "tests", "tools"},
	},
}

// graph maps a package (relative to the module: "runtime", "telemetry/genai")
// to its imports (full paths), tests excluded.
type graph map[string][]string

// violations lists every forbidden import of g under rules, with the chain
// of project packages that leads to it.
func violations(g graph, rules []rule) []string {
	var out []string
	for _, r := range rules {
		if _, ok := g[r.pkg]; !ok {
			out = append(out, r.pkg+": package not found")
			continue
		}
		for _, imp := range g[r.pkg] {
			for _, ext := range r.external {
				if imp == ext || strings.HasPrefix(imp, ext+"/") {
					out = append(out, r.pkg+" imports "+imp)
				}
			}
		}
		// Walk the project packages it reaches, breadth first, keeping the path.
		type step struct{ pkg, path string }
		seen := map[string]bool{r.pkg: true}
		queue := []step{{r.pkg, r.pkg}}
		for len(queue) > 0 {
			s := queue[0]
			queue = queue[1:]
			for _, imp := range g[s.pkg] {
				rel, ok := strings.CutPrefix(imp, module+"/")
				if !ok || seen[rel] {
					continue
				}
				seen[rel] = true
				path := s.path + " -> " + rel
				if r.leaf || forbidden(rel, r.project) {
					out = append(out, r.pkg+" imports "+rel+" ("+path+")")
				}
				queue = append(queue, step{rel, path})
			}
		}
	}
	return out
}

func forbidden(pkg string, list []string) bool {
	for _, f := range list {
		if pkg == f || strings.HasPrefix(pkg, f+"/") {
			return true
		}
	}
	return false
}

// load reads the imports of every project package under the module's root,
// tests excluded.
func load(t *testing.T) graph {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	g := graph{}
	var visit func(rel string)
	visit = func(rel string) {
		if _, done := g[rel]; done {
			return
		}
		p, err := build.ImportDir(filepath.Join(root, filepath.FromSlash(rel)), 0)
		if err != nil {
			t.Fatalf("read package %s: %v", rel, err)
		}
		g[rel] = p.Imports
		for _, imp := range p.Imports {
			if sub, ok := strings.CutPrefix(imp, module+"/"); ok {
				visit(sub)
			}
		}
	}
	for _, r := range rules {
		visit(r.pkg)
	}
	return g
}

// TestLayering fails when a package imports what its layer must not.
func TestLayering(t *testing.T) {
	for _, v := range violations(load(t), rules) {
		t.Error(v)
	}
}

// TestCheckerCatchesForbiddenImports runs the checker on made-up import
// lists: a direct and an indirect forbidden import, a forbidden outside
// package and a leaf that imports the project are all caught; a clean
// graph passes.
func TestCheckerCatchesForbiddenImports(t *testing.T) {
	clean := graph{
		"runtime":         {"context", module + "/graphs", module + "/telemetry/genai"},
		"gateway":         {"net/http", module + "/runtime", module + "/graphs"},
		"graphs":          {"time", "github.com/santhosh-tekuri/jsonschema/v6"},
		"graphs/diagram":  {"encoding/xml", module + "/graphs"},
		"telemetry/genai": {"go.opentelemetry.io/otel/attribute"},
	}
	if v := violations(clean, rules); len(v) != 0 {
		t.Errorf("a clean graph has violations: %v", v)
	}
	bad := graph{
		"runtime":          {module + "/graphs", module + "/telemetry/genai", "net/http"},
		"gateway":          {module + "/runtime", module + "/cache/storetest"},
		"graphs":           {module + "/internal/jsonenc"},
		"graphs/diagram":   {module + "/graphs", module + "/runtime"},
		"telemetry/genai":  {module + "/webhooks"},
		"webhooks":         {},
		"cache/storetest":  {},
		"internal/jsonenc": {},
	}
	want := []string{
		"runtime imports net/http",
		"runtime imports webhooks (runtime -> telemetry/genai -> webhooks)",
		"gateway imports cache/storetest (gateway -> cache/storetest)",
		"graphs imports internal/jsonenc (graphs -> internal/jsonenc)",
		"graphs/diagram imports runtime (graphs/diagram -> runtime)",
	}
	got := violations(bad, rules)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("not caught: %q (got %q)", w, got)
		}
	}
}
