package graphs

import (
	"strings"
	"testing"
)

func TestProviderMaxRetries(t *testing.T) {
	const base = `
providers:
  fake:
    base_url: http://127.0.0.1:9/v1
%s
agents:
  a: {description: d, model: fake/m}
graphs:
  g: {lead: a}
`
	tests := []struct {
		line    string
		want    int // -1: nil
		problem string
	}{
		{"", -1, ""},
		{"    max_retries: 0", 0, ""},
		{"    max_retries: 5", 5, ""},
		{`    max_retries: "3"`, 3, ""},
		{"    max_retries: -1", -1, "max_retries must be between 0 and 10"},
		{"    max_retries: lots", -1, "max_retries"},
	}
	for _, tt := range tests {
		s, err := Parse([]byte(strings.Replace(base, "%s", tt.line, 1)), nil, nil)
		if tt.problem != "" {
			if err == nil || !strings.Contains(err.Error(), tt.problem) {
				t.Errorf("%q: err %v, want a problem about %q", tt.line, err, tt.problem)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tt.line, err)
		}
		got := s.Providers["fake"].MaxRetries
		if (tt.want < 0) != (got == nil) || (got != nil && *got != tt.want) {
			t.Errorf("%q: MaxRetries %v, want %d", tt.line, got, tt.want)
		}
	}
}
