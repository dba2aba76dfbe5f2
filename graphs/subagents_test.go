package graphs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSubagentProblems(t *testing.T) {
	tests := []struct {
		name string
		yml  string
		want []string
	}{
		{
			name: "unknown sub-agent",
			yml: `
agents:
  lead: {model: openai/m, subagents: [ghost]}
graphs: {g: {lead: lead}}`,
			want: []string{`config invalid: agent "lead": sub-agent "ghost" is an unknown agent`},
		},
		{
			name: "sub-agent without description",
			yml: `
agents:
  lead: {model: openai/m, subagents: [helper]}
  helper: {model: openai/m}
graphs: {g: {lead: lead}}`,
			want: []string{`config invalid: agent "lead": sub-agent "helper": no description; give agent "helper" a description or the sub-agent its own`},
		},
		{
			name: "name clashes",
			yml: `
tools:
  ask_helper: {http: {url: "http://127.0.0.1:7000/t"}}
agents:
  lead:
    model: openai/m
    tools: [ask_helper]
    handoffs: [{agent: other, tool_name: summarize}]
    subagents: [helper, {agent: other, tool_name: summarize}]
  helper: {model: openai/m, description: Helps}
  other: {model: openai/m, description: Other}
graphs: {g: {lead: lead}}`,
			want: []string{
				`config invalid: agent "lead": sub-agent "helper": tool name "ask_helper" is also used by its tool "ask_helper"; give the sub-agent another tool_name`,
				`config invalid: agent "lead": sub-agent "other": tool name "summarize" is also used by its handoff to "other"; give the sub-agent another tool_name`,
			},
		},
		{
			name: "cycle",
			yml: `
agents:
  a: {model: openai/m, description: A, subagents: [b]}
  b: {model: openai/m, description: B, subagents: [a]}
graphs: {g: {lead: a}}`,
			want: []string{
				`config invalid: agent "a": sub-agent cycle a asks b asks a`,
				`config invalid: agent "b": sub-agent cycle b asks a asks b`,
			},
		},
		{
			name: "a sub-agent's tool named like a memory tool",
			yml: `
tools:
  remember_notes: {http: {url: "http://127.0.0.1:7000/t"}}
memory:
  notes: {}
agents:
  lead: {model: openai/m, subagents: [helper]}
  helper: {model: openai/m, description: Helps, tools: [remember_notes]}
graphs: {g: {lead: lead, memory: [notes]}}`,
			want: []string{`config invalid: graph "g": memory slot "notes": agent "helper" already has a tool or handoff named "remember_notes"`},
		},
		{
			name: "bad settings and budget",
			yml: `
agents:
  a: {model: openai/m, model_settings: {temperature: 3, max_tokens: 0, stop: [{x: 1}]}}
graphs: {g: {lead: a, max_tokens_per_run: 0}}`,
			want: []string{
				`config invalid: agent "a": model_settings: temperature must be between 0 and 2, got 3`,
				`config invalid: agent "a": model_settings: max_tokens must be at least 1, got 0`,
				`config invalid: agent "a": model_settings: stop must be a string or a list of strings, got a mapping (line 3)`,
				`config invalid: graph "g": max_tokens_per_run must be at least 1, got 0 (leave it out for no budget)`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yml), testBuiltin(), envOf(nil))
			if err == nil {
				t.Fatal("config accepted")
			}
			got := strings.Split(err.Error(), "\n")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSubagentCompiles(t *testing.T) {
	set, err := Parse([]byte(`
agents:
  lead:
    model: openai/m
    model_settings: {temperature: 0.2, stop: END}
    subagents: [Research Desk, {agent: sum, tool_name: summarize, description: Sums, input_schema: {type: object, properties: {text: {type: string}}}}]
  Research Desk: {model: openai/m, description: Finds, subagents: [{agent: sum, description: Sums}]}
  sum: {model: openai/m}
graphs: {g: {lead: lead, instructions: Be brief., max_tokens_per_run: 100}}`), testBuiltin(), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	lead := set.Graphs["g"].Lead
	var names []string
	for _, tl := range lead.Tools {
		names = append(names, string(tl.Kind)+":"+tl.Name)
	}
	if diff := cmp.Diff([]string{"agent:ask_research_desk", "agent:summarize"}, names); diff != "" {
		t.Errorf("lead tools (-want +got):\n%s", diff)
	}
	if !lead.Subagents[0].Agent.Task || lead.Subagents[1].Agent.Task {
		t.Error("only the default schema sends the task alone")
	}
	if *lead.Settings.Temperature != 0.2 || !cmp.Equal(lead.Settings.Stop, []string{"END"}) {
		t.Errorf("settings %+v", lead.Settings)
	}
	if g := set.Graphs["g"]; g.Instructions != "Be brief." || g.MaxTokensPerRun != 100 {
		t.Errorf("graph %+v", g)
	}
	var b strings.Builder
	Describe(&b, set)
	for _, want := range []string{"max_tokens_per_run 100", "    tools: none\n", "subagent ask_research_desk -> Research Desk", "subagent summarize -> sum", "  agent sum\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("validate printout lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := Diagram(&b, set.Graphs["g"], "mermaid"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "a0 ==>|summarize| a2") || !strings.Contains(b.String(), `a1["Research Desk"]`) {
		t.Errorf("mermaid:\n%s", b.String())
	}
	b.Reset()
	_ = Diagram(&b, set.Graphs["g"], "dot")
	if !strings.Contains(b.String(), `"lead" -> "sum" [label="summarize", dir=both, arrowtail=odot, style=bold];`) {
		t.Errorf("dot:\n%s", b.String())
	}
}
