package providers

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/graphs"
)

func TestBuiltin(t *testing.T) {
	env := map[string]string{"OPENAI_API_KEY": "sk-openai", "GEMINI_API_KEY": "g-key", "VLLM_API_KEY": "v-key"}
	got := Builtin(func(k string) string { return env[k] })
	for name, want := range map[string]graphs.Provider{
		"openai":    {Name: "openai", Kind: graphs.ProviderOpenAI, BaseURL: "https://api.openai.com/v1", APIKey: "sk-openai", Timeout: graphs.DefaultProviderTimeout},
		"gemini":    {Name: "gemini", Kind: graphs.ProviderOpenAI, BaseURL: "https://generativelanguage.googleapis.com/v1beta/openai/", APIKey: "g-key", Timeout: graphs.DefaultProviderTimeout},
		"vllm":      {Name: "vllm", Kind: graphs.ProviderOpenAI, BaseURL: "http://127.0.0.1:8000/v1", APIKey: "v-key", Timeout: graphs.DefaultProviderTimeout},
		"ollama":    {Name: "ollama", Kind: graphs.ProviderOpenAI, BaseURL: "http://127.0.0.1:11434/v1", Timeout: graphs.DefaultProviderTimeout},
		"anthropic": {Name: "anthropic", Kind: graphs.ProviderOpenAI, BaseURL: "https://api.anthropic.com/v1/", Timeout: graphs.DefaultProviderTimeout},
		"demo":      {Name: "demo", Kind: graphs.ProviderDemo, Timeout: graphs.DefaultProviderTimeout},
	} {
		if diff := cmp.Diff(want, got[name]); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if len(got) != 12 {
		t.Errorf("got %d providers, want 12", len(got))
	}
	// Every built-in is usable as is.
	r, err := New(got, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
}

// TestBuiltinDocTable keeps the table in Builtin's doc comment, which the
// README copies, in step with the data.
func TestBuiltinDocTable(t *testing.T) {
	src, err := os.ReadFile("builtin.go")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "//\t| ") && !strings.Contains(line, "provider") {
			var cells []string
			for _, c := range strings.Split(strings.Trim(strings.TrimPrefix(line, "//\t"), "| "), "|") {
				cells = append(cells, strings.TrimSpace(c))
			}
			rows = append(rows, strings.Join(cells, " "))
		}
	}
	var want []string
	for _, b := range builtins() {
		key := b.keyEnv
		if key == "" {
			key = "(none)"
		}
		want = append(want, fmt.Sprintf("%s %s %s", b.name, b.baseURL, key))
	}
	want = append(want, "demo (offline, built in; any model name) (none)")
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("doc table out of step with builtins() (-want +got):\n%s", diff)
	}
}
