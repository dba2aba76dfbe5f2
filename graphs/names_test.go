package graphs

import "testing"

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
