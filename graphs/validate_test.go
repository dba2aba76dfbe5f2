package graphs

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestProblems(t *testing.T) {
	tests := []struct {
		name string
		yml  string
		env  map[string]string
		want []string
	}{
		{
			name: "handoff to unknown agent",
			yml: `
agents:
  triage: {model: openai/m, handoffs: [bilingg]}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": handoff to unknown agent "bilingg"`},
		},
		{
			name: "unknown tool",
			yml: `
agents:
  triage: {model: openai/m, tools: [lookup]}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": unknown tool "lookup"`},
		},
		{
			name: "unknown provider",
			yml: `
agents:
  triage: {model: opnai/gpt-4o}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": model "opnai/gpt-4o": unknown provider "opnai" (known: demo, ollama, openai, openrouter)`},
		},
		{
			name: "handoff target without description",
			yml: `
agents:
  triage: {model: openai/m, handoffs: [billing]}
  billing: {model: openai/m}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": handoff to "billing": no description; give agent "billing" a description or the handoff its own`},
		},
		{
			name: "handoff target whose description is blank",
			yml: `
agents:
  triage: {model: openai/m, handoffs: [billing]}
  billing: {model: openai/m, description: "   "}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": handoff to "billing": no description; give agent "billing" a description or the handoff its own`},
		},
		{
			name: "listen port out of range",
			yml: `
server: {listen: ":99999"}
agents:
  triage: {model: openai/m}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: server.listen: ":99999" has no valid port (0 to 65535)`},
		},
		{
			name: "handoff tool name equal to one of the agent's tools",
			yml: `
tools:
  transfer_to_billing: {http: {url: "http://127.0.0.1:7000/t"}}
agents:
  triage: {model: openai/m, tools: [transfer_to_billing], handoffs: [billing]}
  billing: {model: openai/m, description: Billing}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": handoff to "billing": tool name "transfer_to_billing" is also the name of one of the agent's tools; give the handoff another tool_name`},
		},
		{
			name: "two handoffs with the same tool name",
			yml: `
agents:
  triage:
    model: openai/m
    handoffs: [billing, {agent: refunds, tool_name: transfer_to_billing}]
  billing: {model: openai/m, description: Billing}
  refunds: {model: openai/m, description: Refunds}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": handoff to "refunds": tool name "transfer_to_billing" is also used by its handoff to "billing"; give one of them another tool_name`},
		},
		{
			name: "the same target twice",
			yml: `
agents:
  triage: {model: openai/m, handoffs: [billing, billing]}
  billing: {model: openai/m, description: Billing}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": handoff to "billing": tool name "transfer_to_billing" is also used by its handoff to "billing"; give one of them another tool_name`},
		},
		{
			name: "derived tool name outside the pattern",
			yml: `
agents:
  triage: {model: openai/m, handoffs: ["Café Desk"]}
  Café Desk: {model: openai/m, description: Coffee}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": handoff to "Café Desk": the derived tool name "transfer_to_café_desk" does not match ^[a-zA-Z0-9_-]{1,64}$; give the handoff an explicit tool_name`},
		},
		{
			name: "derived tool name too long",
			yml: `
agents:
  triage: {model: openai/m, handoffs: [` + strings.Repeat("x", 60) + `]}
  ` + strings.Repeat("x", 60) + `: {model: openai/m, description: Long}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": handoff to "` + strings.Repeat("x", 60) + `": the derived tool name "transfer_to_` + strings.Repeat("x", 60) + `" does not match ^[a-zA-Z0-9_-]{1,64}$; give the handoff an explicit tool_name`},
		},
		{
			name: "explicit tool name outside the pattern",
			yml: `
agents:
  triage: {model: openai/m, handoffs: [{agent: billing, tool_name: "pay now"}]}
  billing: {model: openai/m, description: Billing}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": handoff to "billing": tool_name "pay now" does not match ^[a-zA-Z0-9_-]{1,64}$`},
		},
		{
			name: "tool name outside the pattern",
			yml: `
tools:
  look up: {http: {url: "http://127.0.0.1:7000/t"}}
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: tool "look up": the name must match ^[a-zA-Z0-9_-]{1,64}$`},
		},
		{
			name: "graph with unknown lead",
			yml: `
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triag}}`,
			want: []string{`config invalid: graph "support": unknown lead agent "triag"`},
		},
		{
			name: "graph without lead",
			yml: `
agents: {triage: {model: openai/m}}
graphs: {support: {description: Desk}}`,
			want: []string{`config invalid: graph "support": lead is required`},
		},
		{
			name: "no graphs",
			yml:  `agents: {triage: {model: openai/m}}`,
			want: []string{"config invalid: no graphs defined; add one under `graphs:` with a lead agent"},
		},
		{
			name: "empty file",
			yml:  ``,
			want: []string{"config invalid: no graphs defined; add one under `graphs:` with a lead agent"},
		},
		{
			name: "agent without model",
			yml: `
agents: {triage: {description: Desk}}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": model is required ("provider/model", e.g. openai/gpt-4o-mini)`},
		},
		{
			name: "model without provider",
			yml: `
agents: {triage: {model: gpt-4o}}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": model "gpt-4o" must be "provider/model", e.g. openai/gpt-4o-mini`},
		},
		{
			name: "tool without http.url",
			yml: `
tools: {lookup: {description: Looks up}}
agents: {triage: {model: openai/m, tools: [lookup]}}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: tool "lookup": http.url is required`},
		},
		{
			name: "tool url not http",
			yml: `
tools: {lookup: {http: {url: "ftp://x/y"}}}
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: tool "lookup": http.url: "ftp://x/y" is not an absolute http(s) URL`},
		},
		{
			name: "bad durations",
			yml: `
server: {drain_timeout: soon}
store: {session_ttl: 1day, timeout: -2s, lock_lease: 0s}
tools: {lookup: {http: {url: "http://x/y", timeout: 5}}}
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triage}}`,
			want: []string{
				`config invalid: server.drain_timeout: "soon" is not a duration (write e.g. "500ms", "30s", "24h")`,
				`config invalid: store.session_ttl: "1day" is not a duration (write e.g. "500ms", "30s", "24h")`,
				`config invalid: store.timeout: must be positive, got "-2s"`,
				`config invalid: store.lock_lease: must be positive, got "0s"`,
				`config invalid: tool "lookup": http.timeout: "5" is not a duration (write e.g. "500ms", "30s", "24h")`,
			},
		},
		{
			name: "api keys",
			yml: `
server:
  api_keys:
    - {name: acme, key: k1}
    - {name: "", key: k2}
    - {name: acme, key: k1}
    - {name: other, key: "${UNSET_KEY}"}
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triage}}`,
			want: []string{
				`config invalid: server.api_keys[1]: name is required`,
				`config invalid: server.api_keys[2]: name "acme" is also used by server.api_keys[0]`,
				`config invalid: server.api_keys[2]: key is the same as server.api_keys[0]'s`,
				`config invalid: server.api_keys[3]: key is required (is its ${VAR} set?)`,
			},
		},
		{
			name: "limits",
			yml: `
server: {max_body_bytes: 0}
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triage, max_handoffs: -1, max_steps: 0}}`,
			want: []string{
				`config invalid: server.max_body_bytes: must be a positive number of bytes, got 0`,
				`config invalid: graph "support": max_handoffs: must be at least 1, got -1`,
				`config invalid: graph "support": max_steps: must be at least 1, got 0`,
			},
		},
		{
			name: "hardening limits",
			yml: `
server: {read_timeout: soon, idle_timeout: 0s}
store: {max_session_bytes: 0}
providers: {openai: {max_response_bytes: -1}}
agents: {triage: {model: openai/m}}
graphs: {support: {lead: triage, max_tool_calls_per_turn: 0, tool_concurrency: -2}}`,
			want: []string{
				`config invalid: server.idle_timeout: must be positive, got "0s"`,
				`config invalid: server.read_timeout: "soon" is not a duration (write e.g. "500ms", "30s", "24h")`,
				`config invalid: store.max_session_bytes: must be a positive number of bytes, got 0`,
				`config invalid: provider "openai": max_response_bytes: must be a positive number of bytes, got -1`,
				`config invalid: graph "support": max_tool_calls_per_turn: must be at least 1, got 0`,
				`config invalid: graph "support": tool_concurrency: must be at least 1, got -2`,
			},
		},
		{
			name: "provider without base_url",
			yml: `
providers: {local: {api_key: x}}
agents: {triage: {model: local/m}}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: provider "local": base_url is required (it is not a built-in provider)`},
		},
		{
			name: "handoff without agent",
			yml: `
agents:
  triage:
    model: openai/m
    handoffs:
      - {tool_name: go}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": handoff at line 6: agent is required`},
		},
		{
			name: "on_handoff without url",
			yml: `
agents:
  triage: {model: openai/m, handoffs: [{agent: billing, on_handoff: {timeout: 1s}}]}
  billing: {model: openai/m, description: Billing}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": handoff to "billing": on_handoff.url is required`},
		},
		{
			name: "enabled_when principal that no key has",
			yml: `
agents:
  triage: {model: openai/m, handoffs: [{agent: billing, enabled_when: {principal: acme}}]}
  billing: {model: openai/m, description: Billing}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": handoff to "billing": enabled_when.principal "acme" is not the name of any server.api_keys entry, so the handoff could never be enabled`},
		},
		{
			name: "empty enabled_when",
			yml: `
agents:
  triage: {model: openai/m, handoffs: [{agent: billing, enabled_when: {}}]}
  billing: {model: openai/m, description: Billing}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": handoff to "billing": enabled_when needs metadata or principal`},
		},
		{
			name: "enabled_when metadata value that is not a scalar",
			yml: `
agents:
  triage: {model: openai/m, handoffs: [{agent: billing, enabled_when: {metadata: {plan: [a, b]}}}]}
  billing: {model: openai/m, description: Billing}
graphs: {support: {lead: triage}}`,
			want: []string{`config invalid: agent "triage": handoff to "billing": enabled_when.metadata "plan" must be a single value, got a list (line 3)`},
		},
		{
			name: "agent name with a control character",
			yml: `
agents:
  "tri\tage": {model: openai/m}
graphs: {support: {lead: "tri\tage"}}`,
			want: []string{`config invalid: agent "tri\tage": an agent name must be non-empty and printable`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problemsOf(t, tt.yml, tt.env)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSchemaProblems(t *testing.T) {
	tests := []struct {
		name       string
		yml        string
		wantPrefix string
		wantInLine string
	}{
		{
			name: "handoff input_schema with an unknown type",
			yml: `
agents:
  triage:
    model: openai/m
    handoffs:
      - agent: billing
        input_schema: {type: object, properties: {orderId: {type: strin}}}
  billing: {model: openai/m, description: Billing}
graphs: {support: {lead: triage}}`,
			wantPrefix: `config invalid: agent "triage": handoff to "billing": invalid input_schema: `,
			wantInLine: "/properties/orderId/type",
		},
		{
			name: "handoff input_schema that is not a mapping",
			yml: `
agents:
  triage: {model: openai/m, handoffs: [{agent: billing, input_schema: true}]}
  billing: {model: openai/m, description: Billing}
graphs: {support: {lead: triage}}`,
			wantPrefix: `config invalid: agent "triage": handoff to "billing": invalid input_schema: `,
			wantInLine: `want a mapping, got "true"`,
		},
		{
			name: "handoff input_schema of another type than object",
			yml: `
agents:
  triage: {model: openai/m, handoffs: [{agent: billing, input_schema: {type: string}}]}
  billing: {model: openai/m, description: Billing}
graphs: {support: {lead: triage}}`,
			wantPrefix: `config invalid: agent "triage": handoff to "billing": invalid input_schema: `,
			wantInLine: `want an object schema (type: object), got type string`,
		},
		{
			name: "tool parameters of another type than object",
			yml: `
tools:
  lookup:
    http: {url: "http://x/y"}
    parameters: {type: [string, "null"]}
agents: {triage: {model: openai/m, tools: [lookup]}}
graphs: {support: {lead: triage}}`,
			wantPrefix: `config invalid: tool "lookup": invalid parameters schema: `,
			wantInLine: `want an object schema (type: object)`,
		},
		{
			name: "tool parameters with a bad pattern",
			yml: `
tools:
  lookup:
    http: {url: "http://x/y"}
    parameters: {type: object, properties: {id: {type: string, pattern: "("}}}
agents: {triage: {model: openai/m, tools: [lookup]}}
graphs: {support: {lead: triage}}`,
			wantPrefix: `config invalid: tool "lookup": invalid parameters schema: `,
			wantInLine: "/properties/id/pattern",
		},
		{
			name: "schema that refers to a file",
			yml: `
agents:
  triage:
    model: openai/m
    handoffs:
      - agent: billing
        input_schema: {$ref: "file:///etc/passwd"}
  billing: {model: openai/m, description: Billing}
graphs: {support: {lead: triage}}`,
			wantPrefix: `config invalid: agent "triage": handoff to "billing": invalid input_schema: `,
			wantInLine: "file:///etc/passwd",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problemsOf(t, tt.yml, nil)
			if len(got) != 1 || !strings.HasPrefix(got[0], tt.wantPrefix) || !strings.Contains(got[0], tt.wantInLine) {
				t.Errorf("problems = %q\nwant one line starting %q and holding %q", got, tt.wantPrefix, tt.wantInLine)
			}
		})
	}
}

func TestUnknownKeys(t *testing.T) {
	tests := []struct {
		name string
		yml  string
		want string
	}{
		{
			name: "top level",
			yml:  "agent: {}\nagents: {triage: {model: openai/m}}\ngraphs: {support: {lead: triage}}",
			want: `config invalid: config: unknown key "agent" (line 1); known keys: server, store, telemetry, providers, tools, mcp_servers, memory, guardrails, agents, graphs`,
		},
		{
			name: "server",
			yml:  "server: {listn: ':1'}\nagents: {triage: {model: openai/m}}\ngraphs: {support: {lead: triage}}",
			want: `config invalid: server: unknown key "listn" (line 1); known keys: listen, session_header, passthrough, max_body_bytes, drain_timeout, api_keys, idle_timeout, read_timeout, stream_write_timeout`,
		},
		{
			name: "agent",
			yml:  "agents:\n  triage:\n    model: openai/m\n    modle: x\ngraphs: {support: {lead: triage}}",
			want: `config invalid: agents.triage: unknown key "modle" (line 4); known keys: description, instructions, model, tools, mcp, handoffs, subagents, model_settings, input_guardrails, output_guardrails, permissions`,
		},
		{
			name: "handoff",
			yml: `agents:
  triage:
    model: openai/m
    handoffs:
      - {agent: billing, toolname: x}
  billing: {model: openai/m, description: B}
graphs: {support: {lead: triage}}`,
			want: `config invalid: agents.triage.handoffs[0]: unknown key "toolname" (line 5); known keys: agent, tool_name, description, input_schema, input_filter, enabled_when, on_handoff`,
		},
		{
			name: "enabled_when",
			yml: `agents:
  triage:
    model: openai/m
    handoffs:
      - {agent: billing, enabled_when: {metadata: {a: b}, user: x}}
  billing: {model: openai/m, description: B}
graphs: {support: {lead: triage}}`,
			want: `config invalid: agents.triage.handoffs[0].enabled_when: unknown key "user" (line 5); known keys: metadata, principal`,
		},
		{
			name: "tool http",
			yml:  "tools: {t: {http: {url: 'http://x/y', method: GET}}}\nagents: {triage: {model: openai/m}}\ngraphs: {support: {lead: triage}}",
			want: `config invalid: tools.t.http: unknown key "method" (line 1); known keys: url, timeout`,
		},
		{
			name: "graph",
			yml:  "agents: {triage: {model: openai/m}}\ngraphs: {support: {lead: triage, max_turns: 3}}",
			want: `config invalid: graphs.support: unknown key "max_turns" (line 2); known keys: lead, description, max_handoffs, max_steps, max_tool_calls_per_turn, tool_concurrency, memory, instructions, max_tokens_per_run, input_guardrails, output_guardrails, permissions, approval_ttl, pre_tool_call, on_approval_required`,
		},
		{
			name: "provider",
			yml:  "providers: {openai: {apikey: x}}\nagents: {triage: {model: openai/m}}\ngraphs: {support: {lead: triage}}",
			want: `config invalid: providers.openai: unknown key "apikey" (line 1); known keys: base_url, api_key, timeout, max_retries, stream_idle_timeout, headers, max_response_bytes`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problemsOf(t, tt.yml, nil)
			if diff := cmp.Diff([]string{tt.want}, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShapeProblems(t *testing.T) {
	tests := []struct {
		name string
		yml  string
		want []string
	}{
		{
			name: "yaml syntax",
			yml:  "agents: {triage: {model: openai/m}\ngraphs: x",
			want: []string{`config invalid: yaml: line 1: did not find expected ',' or '}'`},
		},
		{
			name: "two documents",
			yml:  "graphs: {}\n---\ngraphs: {}",
			want: []string{`config invalid: yaml: a config file holds one document; found a second one (---)`},
		},
		{
			name: "not a mapping",
			yml:  "- a\n- b",
			want: []string{`config invalid: line 1: the config must be a mapping of sections (server, agents, graphs, ...)`},
		},
		{
			name: "duplicate key",
			yml:  "agents:\n  triage: {model: openai/m}\n  triage: {model: openai/n}\ngraphs: {support: {lead: triage}}",
			want: []string{`config invalid: agents: key "triage" given twice (lines 2 and 3)`},
		},
		{
			name: "wrong shapes",
			yml:  "server: {passthrough: maybe, max_body_bytes: lots}\nagents: {triage: {model: openai/m, tools: lookup}}\ngraphs: [support]",
			want: []string{
				`config invalid: server.passthrough: want true or false, got "maybe" (line 1)`,
				`config invalid: server.max_body_bytes: want an integer, got "lots" (line 1)`,
				`config invalid: agents.triage.tools: want a list, got "lookup" (line 2)`,
				`config invalid: graphs: want a mapping, got a list (line 3)`,
				"config invalid: no graphs defined; add one under `graphs:` with a lead agent",
			},
		},
		{
			name: "model of the wrong shape",
			yml:  "agents: {triage: {model: {provider: openai}}}\ngraphs: {support: {lead: triage}}",
			want: []string{`config invalid: agent "triage": model must be "provider/model" or a list of them, got a mapping (line 1)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problemsOf(t, tt.yml, nil)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestManyProblemsAtOnce(t *testing.T) {
	env := map[string]string{"ACME_KEY": ""}
	_, err := LoadFile("testdata/invalid.yaml", testBuiltin(), envOf(env))
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("LoadFile = %v; want a *ConfigError", err)
	}
	checkGolden(t, "invalid.golden", ce.Error()+"\n")
}

func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a: &a [x, x, x, x, x, x, x, x, x, x]\n")
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		fmt.Fprintf(&b, "%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", name, name, prev, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = name
	}
	fmt.Fprintf(&b, "agents: {solo: {model: demo/echo, tools: *%s}}\ngraphs: {chat: {lead: solo}}\n", prev)
	got := problemsOf(t, b.String(), nil)
	want := []string{"config invalid: yaml: document contains excessive aliasing"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}
