package graphs

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// update rewrites golden files: go test ./graphs -update
var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// testBuiltin stands for the built-in providers the gateway passes in.
func testBuiltin() map[string]Provider {
	return map[string]Provider{
		"openai":     {BaseURL: "https://api.openai.com/v1"},
		"openrouter": {BaseURL: "https://openrouter.ai/api/v1", Headers: map[string]string{"X-Title": "switchboard"}},
		"ollama":     {BaseURL: "http://127.0.0.1:11434/v1", Timeout: 300 * time.Second},
		"demo":       {Kind: "demo"},
	}
}

// envOf returns a getenv over a fixed map.
func envOf(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// mustParse parses a config that must be valid.
func mustParse(t *testing.T, yml string, env map[string]string) *Set {
	t.Helper()
	s, err := Parse([]byte(yml), testBuiltin(), envOf(env))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

// problemsOf parses a config that must be invalid and returns its problems.
func problemsOf(t *testing.T, yml string, env map[string]string) []string {
	t.Helper()
	s, err := Parse([]byte(yml), testBuiltin(), envOf(env))
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("Parse = %v, %v; want a *ConfigError", s, err)
	}
	return ce.Problems
}

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}
