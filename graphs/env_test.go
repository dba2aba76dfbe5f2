package graphs

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSubstitution(t *testing.T) {
	tests := []struct {
		name string
		yml  string
		env  map[string]string
		// get reads the substituted value from the compiled set.
		get  func(*Set) any
		want any
	}{
		{
			name: "inside a string",
			yml:  `instructions: "Hello ${WHO}, welcome to ${PLACE}."`,
			env:  map[string]string{"WHO": "Ada", "PLACE": "Acme"},
			get:  func(s *Set) any { return s.Graphs["chat"].Lead.Instructions },
			want: "Hello Ada, welcome to Acme.",
		},
		{
			name: "unset variable is empty",
			yml:  `instructions: "[${UNSET}]"`,
			get:  func(s *Set) any { return s.Graphs["chat"].Lead.Instructions },
			want: "[]",
		},
		{
			name: "value cannot inject YAML",
			yml:  `instructions: ${EVIL}`,
			env:  map[string]string{"EVIL": "x\nmodel: other/y\ntools: [a]"},
			get:  func(s *Set) any { return s.Graphs["chat"].Lead.Instructions },
			want: "x\nmodel: other/y\ntools: [a]",
		},
		{
			name: "flow syntax in a value stays text",
			yml:  `instructions: ${EVIL}`,
			env:  map[string]string{"EVIL": "{a: 1}"},
			get:  func(s *Set) any { return s.Graphs["chat"].Lead.Instructions },
			want: "{a: 1}",
		},
		{
			name: "a value is not expanded again",
			yml:  `instructions: ${A}`,
			env:  map[string]string{"A": "${B}", "B": "secret"},
			get:  func(s *Set) any { return s.Graphs["chat"].Lead.Instructions },
			want: "${B}",
		},
		{
			name: "model reference",
			yml:  `instructions: x`,
			env:  map[string]string{"MODEL": "openai/gpt-4o-mini"},
			get:  func(s *Set) any { return s.Graphs["chat"].Lead.Models[0].String() },
			want: "openai/gpt-4o-mini",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"MODEL": "demo/echo"}
			for k, v := range tt.env {
				env[k] = v
			}
			yml := `
agents:
  solo:
    model: ${MODEL}
    ` + tt.yml + `
graphs: {chat: {lead: solo}}
`
			s := mustParse(t, yml, env)
			if diff := cmp.Diff(tt.want, tt.get(s)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSubstitutionTypes(t *testing.T) {
	env := map[string]string{
		"STEPS": "7", "PASS": "true", "BODY": "2048", "TTL": "36h",
		"PLAN": "pro", "PROP": "orderId", "HOOK": "http://hooks.local/h",
	}
	s := mustParse(t, `
server:
  passthrough: ${PASS}
  max_body_bytes: "${BODY}"
store: {session_ttl: "${TTL}"}
agents:
  a:
    model: demo/echo
    handoffs:
      - agent: b
        input_schema:
          type: object
          properties:
            ${PROP}: {type: string, description: "plan ${PLAN}"}
        enabled_when: {metadata: {plan: "${PLAN}"}}
        on_handoff: {url: "${HOOK}"}
  b: {model: demo/echo, description: B}
  anchors:
    model: demo/echo
    description: &d "desk ${PLAN}"
    instructions: *d
graphs:
  chat:
    lead: a
    max_steps: ${STEPS}
`, env)
	if !s.Server.Passthrough || s.Server.MaxBodyBytes != 2048 || s.Store.SessionTTL.Hours() != 36 {
		t.Errorf("typed substitution: passthrough %v, max_body_bytes %d, session_ttl %v", s.Server.Passthrough, s.Server.MaxBodyBytes, s.Store.SessionTTL)
	}
	if got := s.Graphs["chat"].MaxSteps; got != 7 {
		t.Errorf("max_steps = %d; want 7", got)
	}
	h := s.Graphs["chat"].Lead.Handoffs[0]
	// A mapping key is a name, not a setting: it is left as written.
	if got, want := string(h.Parameters), `{"type":"object","properties":{"${PROP}":{"type":"string","description":"plan pro"}}}`; got != want {
		t.Errorf("input_schema = %s; want %s", got, want)
	}
	if h.EnabledWhen.Metadata["plan"] != "pro" || h.OnHandoff.URL != "http://hooks.local/h" {
		t.Errorf("enabled_when %v, on_handoff %v", h.EnabledWhen, h.OnHandoff)
	}
}

func TestEnvOverrides(t *testing.T) {
	const yml = `
server: {listen: "127.0.0.1:1111"}
store: {url: "memory://"}
telemetry: {service_name: file-name, otlp_endpoint: "http://file:4318"}
agents: {solo: {model: demo/echo}}
graphs: {chat: {lead: solo}}
`
	type got struct{ Listen, StoreURL, Service, Endpoint string }
	tests := []struct {
		name string
		env  map[string]string
		want got
	}{
		{"file values without env", nil, got{"127.0.0.1:1111", "memory://", "file-name", "http://file:4318"}},
		{
			name: "env wins",
			env: map[string]string{
				"SWITCHBOARD_LISTEN":          ":9999",
				"SWITCHBOARD_STORE_URL":       "redis://127.0.0.1:6379/1",
				"OTEL_SERVICE_NAME":           "env-name",
				"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
			},
			want: got{":9999", "redis://127.0.0.1:6379/1", "env-name", "http://collector:4318"},
		},
		{
			name: "empty env does not override",
			env:  map[string]string{"SWITCHBOARD_LISTEN": "", "OTEL_SERVICE_NAME": ""},
			want: got{"127.0.0.1:1111", "memory://", "file-name", "http://file:4318"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, yml, tt.env)
			g := got{s.Server.Listen, s.Store.URL, s.Telemetry.ServiceName, s.Telemetry.OTLPEndpoint}
			if diff := cmp.Diff(tt.want, g); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnvOverrideIsValidated(t *testing.T) {
	got := problemsOf(t, `
agents: {solo: {model: demo/echo}}
graphs: {chat: {lead: solo}}
`, map[string]string{"SWITCHBOARD_LISTEN": "nonsense"})
	want := []string{`config invalid: server.listen: "nonsense" is not host:port (e.g. 127.0.0.1:8080 or :8080)`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// The number settings of model_settings take ${VAR} as the others do, and
// one that is not a number is a problem naming its setting.
func TestSubstitutionFloats(t *testing.T) {
	s := mustParse(t, `
agents:
  a:
    model: demo/echo
    model_settings:
      temperature: ${TEMP}
      top_p: 1
      presence_penalty: "${PEN}"
      max_tokens: ${NUM}
graphs: {chat: {lead: a}}
`, map[string]string{"TEMP": "0.3", "PEN": "-0.5", "NUM": "5"})
	ms := s.Graphs["chat"].Lead.Settings
	if ms == nil || ms.Temperature == nil || *ms.Temperature != 0.3 || *ms.TopP != 1 || *ms.PresencePenalty != -0.5 || *ms.MaxTokens != 5 {
		t.Fatalf("model_settings %+v", ms)
	}
	_, err := Parse([]byte(`
agents:
  a: {model: demo/echo, model_settings: {temperature: hot}}
graphs: {chat: {lead: a}}
`), testBuiltin(), envOf(nil))
	if err == nil || !strings.Contains(err.Error(), `config invalid: agents.a.model_settings.temperature: want a number, got "hot"`) {
		t.Errorf("a temperature that is not a number: %v", err)
	}
}
