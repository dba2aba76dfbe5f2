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
