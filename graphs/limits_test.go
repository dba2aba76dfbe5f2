package graphs

import (
	"strings"
	"testing"
)

const limitsYAML = `
server:
  api_keys:
    - name: acme
      key: k1
      limits: %s
providers:
  p: {base_url: http://127.0.0.1:1/v1}
agents:
  a: {model: p/m}
graphs:
  g: {lead: a}
`

func TestAPIKeyLimits(t *testing.T) {
	set, err := Parse([]byte(strings.Replace(limitsYAML, "%s", "{requests_per_minute: 60, tokens_per_day: 1000}", 1)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Server.APIKeys[0].Limits; got != (Limits{RequestsPerMinute: 60, TokensPerDay: 1000}) {
		t.Errorf("limits %+v", got)
	}
	for _, bad := range []string{"{requests_per_minute: 0}", "{tokens_per_minute: -5}", "{tokens_per_hour: 5}"} {
		_, err := Parse([]byte(strings.Replace(limitsYAML, "%s", bad, 1)), nil, nil)
		if err == nil || !strings.Contains(err.Error(), "config invalid: ") || !strings.Contains(err.Error(), "limits") && !strings.Contains(err.Error(), "tokens_per_hour") {
			t.Errorf("limits %s: %v, want a config error naming it", bad, err)
		}
	}
}

func TestWaitReplicas(t *testing.T) {
	base := strings.Replace(limitsYAML, "%s", "{requests_per_minute: 1}", 1)
	for _, tt := range []struct {
		store string
		want  int
		err   string
	}{
		{"store: {url: redis://127.0.0.1:6379/0, wait_replicas: 2}", 2, ""},
		{"store: {wait_replicas: 1}", 0, "memory store has none"},
		{"store: {url: redis://127.0.0.1:6379/0, wait_replicas: -1}", 0, "must be 0 or more"},
	} {
		set, err := Parse([]byte(tt.store+"\n"+base), nil, nil)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.store, err)
		case tt.err == "" && set.Store.WaitReplicas != tt.want:
			t.Errorf("%s: wait_replicas %d, want %d", tt.store, set.Store.WaitReplicas, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: %v, want an error with %q", tt.store, err, tt.err)
		}
	}
}
