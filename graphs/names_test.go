package graphs

import (
	"strings"
	"testing"
)

func TestDeriveToolName(t *testing.T) {
	tests := []struct{ agent, want string }{
		{"billing", "transfer_to_billing"},
		{"Refund Agent", "transfer_to_refund_agent"},
		{"tech-support", "transfer_to_tech-support"},
		{"Tier  2\t Support", "transfer_to_tier_2_support"},
		{"Café", "transfer_to_café"},
		{"UPPER_case", "transfer_to_upper_case"},
	}
	for _, tt := range tests {
		if got := DeriveToolName(tt.agent); got != tt.want {
			t.Errorf("DeriveToolName(%q) = %q; want %q", tt.agent, got, tt.want)
		}
	}
}

// The loop that checks tool names says what toolNamePattern, which error
// messages quote, says.
func FuzzValidToolName(f *testing.F) {
	for _, s := range []string{"", "a", "get_weather", "transfer_to_billing", "tech-support", "a b", "a/b", "café",
		"x\n", "\nx", strings.Repeat("a", 64), strings.Repeat("a", 65), "A-Z_09", "$", "a.b", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := validToolName(name), toolNamePattern.MatchString(name); got != want {
			t.Errorf("validToolName(%q) = %v, the pattern says %v", name, got, want)
		}
	})
}
