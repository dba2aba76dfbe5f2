// Package providers holds Switchboard's upstream clients: a Registry that
// implements runtime.Model over any OpenAI-compatible endpoint (through
// go-openai, with pooled connections, retries before the first byte,
// timeouts and trace propagation) and the offline demo model.
package providers

import (
	"os"

	"github.com/switchboard-ai/switchboard/graphs"
)

// builtin is one built-in provider default.
type builtin struct {
	name, baseURL, keyEnv string
}

// builtins lists the built-in providers; keep the table in Builtin's doc
// comment in step (a test checks it).
func builtins() []builtin {
	return []builtin{
		{"openai", "https://api.openai.com/v1", "OPENAI_API_KEY"},
		{"openrouter", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"},
		{"ollama", "http://127.0.0.1:11434/v1", ""},
		{"lmstudio", "http://127.0.0.1:1234/v1", ""},
		{"vllm", "http://127.0.0.1:8000/v1", "VLLM_API_KEY"},
		{"groq", "https://api.groq.com/openai/v1", "GROQ_API_KEY"},
		{"together", "https://api.together.xyz/v1", "TOGETHER_API_KEY"},
		{"mistral", "https://api.mistral.ai/v1", "MISTRAL_API_KEY"},
		{"deepseek", "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"},
		{"anthropic", "https://api.anthropic.com/v1/", "ANTHROPIC_API_KEY"},
		{"gemini", "https://generativelanguage.googleapis.com/v1beta/openai/", "GEMINI_API_KEY"},
	}
}

// Builtin returns the built-in provider defaults, keyed by name, with API
// keys read through getenv (nil means os.Getenv). A config's `providers:`
// entries override them. Every one has the default timeout of 120s.
//
//	| provider   | base_url                                                 | api_key from         |
//	|------------|----------------------------------------------------------|----------------------|
//	| openai     | https://api.openai.com/v1                                | OPENAI_API_KEY       |
//	| openrouter | https://openrouter.ai/api/v1                             | OPENROUTER_API_KEY   |
//	| ollama     | http://127.0.0.1:11434/v1                                | (none)               |
//	| lmstudio   | http://127.0.0.1:1234/v1                                 | (none)               |
//	| vllm       | http://127.0.0.1:8000/v1                                 | VLLM_API_KEY         |
//	| groq       | https://api.groq.com/openai/v1                           | GROQ_API_KEY         |
//	| together   | https://api.together.xyz/v1                              | TOGETHER_API_KEY     |
//	| mistral    | https://api.mistral.ai/v1                                | MISTRAL_API_KEY      |
//	| deepseek   | https://api.deepseek.com/v1                              | DEEPSEEK_API_KEY     |
//	| anthropic  | https://api.anthropic.com/v1/                            | ANTHROPIC_API_KEY    |
//	| gemini     | https://generativelanguage.googleapis.com/v1beta/openai/ | GEMINI_API_KEY       |
//	| demo       | (offline, built in; any model name)                      | (none)               |
//
// anthropic and gemini are those vendors' OpenAI-compatible endpoints.
func Builtin(getenv func(string) string) map[string]graphs.Provider {
	if getenv == nil {
		getenv = os.Getenv
	}
	out := make(map[string]graphs.Provider, len(builtins())+1)
	for _, b := range builtins() {
		p := graphs.Provider{Name: b.name, Kind: graphs.ProviderOpenAI, BaseURL: b.baseURL, Timeout: graphs.DefaultProviderTimeout}
		if b.keyEnv != "" {
			p.APIKey = getenv(b.keyEnv)
		}
		out[b.name] = p
	}
	out["demo"] = graphs.Provider{Name: "demo", Kind: graphs.ProviderDemo, Timeout: graphs.DefaultProviderTimeout}
	return out
}
