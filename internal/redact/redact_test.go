package redact

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://:pw@127.0.0.1:6379/0":                       "redis://:xxxxx@127.0.0.1:6379/0",
		"redis://user:s3cr%40t@h:1/2?dial_timeout=1s":        "redis://user:xxxxx@h:1/2?dial_timeout=1s",
		"redis-sentinel://u:p@h1:26379,h2:26379/0?master=m":  "redis-sentinel://u:xxxxx@h1:26379,h2:26379/0?master=m",
		"redis-sentinel://h1/0?master=m&sentinel_password=P": "redis-sentinel://h1/0?master=m&sentinel_password=xxxxx",
		"memory://":                            "memory://",
		"http://127.0.0.1:7000/charges":        "http://127.0.0.1:7000/charges",
		"http://u@127.0.0.1:7000/x?api_key=k1": "http://u@127.0.0.1:7000/x?api_key=xxxxx",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSecrets(t *testing.T) {
	for _, tc := range []struct{ in, secret string }{
		{`Incorrect API key provided: sk-proj-AbC123xyz. You can find your key at ...`, "sk-proj-AbC123xyz"},
		{`request headers: {"Authorization": "Bearer tok_9f8e7d6c5b"}`, "tok_9f8e7d6c5b"},
		{`authorization: bearer abc.def.ghi`, "abc.def.ghi"},
		{`GET /v1?api_key=AIzaSyD-123456&x=1`, "AIzaSyD-123456"},
		{`{"x-api-key":"k-9a8b7c6d"}`, "k-9a8b7c6d"},
		{`dial redis://:hunter22@10.0.0.5:6379`, "hunter22"},
		{`password=correct-horse`, "correct-horse"},
		{`Invalid API Key gsk_abcdefghijklmnopqrstuvwxyz012345`, "gsk_abcdefghijklmnopqrstuvwxyz012345"},
		{`API key not valid: AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW`, "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"},
		{`incorrect key xai-0123456789abcdefABCDEF`, "xai-0123456789abcdefABCDEF"},
		{`token hf_AbCdEfGhIjKlMnOpQrStUv rejected`, "hf_AbCdEfGhIjKlMnOpQrStUv"},
		{`signed by AKIAIOSFODNN7EXAMPLE`, "AKIAIOSFODNN7EXAMPLE"},
	} {
		got := Secrets(tc.in)
		if strings.Contains(got, tc.secret) || !strings.Contains(got, Mask) {
			t.Errorf("Secrets(%q) = %q, still holds %q", tc.in, got, tc.secret)
		}
	}
	for _, in := range []string{"model gpt-4o-mini does not exist", "unknown field hf_token in call_sb_0123456789abcdef01234567", "Maximum 4096 tokens"} {
		if Secrets(in) != in {
			t.Errorf("Secrets changed plain text: %q", Secrets(in))
		}
	}
	if got := Addresses("dial tcp 10.0.0.5:443: connect: connection refused; upstream [fd00::1]:8080 and 192.168.1.20 down; model v1.2"); got != "dial tcp xxxxx: connect: connection refused; upstream xxxxx and xxxxx down; model v1.2" {
		t.Errorf("Addresses = %q", got)
	}
	if got := Addresses("upstream internal-lb.corp.local:8443 and localhost:9000 down; model gpt-4.1-mini; see https://platform.openai.com/docs at 12:30"); got != "upstream xxxxx and xxxxx down; model gpt-4.1-mini; see https://platform.openai.com/docs at 12:30" {
		t.Errorf("Addresses = %q", got)
	}
	if in := "messages[0].content[1] is invalid"; Addresses(in) != in {
		t.Errorf("Addresses changed plain text: %q", Addresses(in))
	}
	// A masked value leaves the text after it as it was.
	if got := Secrets("redis-sentinel://h?sentinel_password=sp: a sentinel url needs ?master=<name>"); got != "redis-sentinel://h?sentinel_password=xxxxx: a sentinel url needs ?master=<name>" {
		t.Errorf("Secrets ate the separator: %q", got)
	}
	if got := Known("the key abcdef123 was refused", "abcdef123", "x"); got != "the key xxxxx was refused" {
		t.Errorf("Known = %q", got)
	}
}

func sources(texts ...string) func(func(string) bool) { return slices.Values(texts) }

func TestEchoes(t *testing.T) {
	prompt := "My account number is 4417-1234 and I was charged twice for the premium plan."
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]string{
		{"role": "system", "content": "You are the billing desk.\nBe brief."},
		{"role": "user", "content": prompt},
	}})
	for name, tc := range map[string]struct {
		text string
		want bool
	}{
		"whole request echoed":    {"internal error processing " + string(body), true},
		"quoted part":             {`invalid content "I was charged twice for the premium" in messages[1]`, true},
		"plain error":             {"The model `gpt-5` does not exist or you do not have access to it.", false},
		"short system prompt":     {"bad system prompt: you are the billing desk. be brief", true},
		"too short to tell":       {"error", false},
		"shared common word only": {"premium plan not available", false},
	} {
		if got := Echoes(tc.text, sources("You are the billing desk.\nBe brief.", prompt)); got != tc.want {
			t.Errorf("%s: Echoes = %v, want %v", name, got, tc.want)
		}
	}
}

// A request echoed as JSON with every character outside ASCII escaped
// (\uXXXX, as Python's json.dumps writes it, surrogate pairs included) is
// an echo as the raw text is.
func TestEchoesThroughUnicodeEscapes(t *testing.T) {
	prompt := "我的银行卡密码是六个八请帮我查询账户余额谢谢 😀 你们的帮助"
	var esc strings.Builder
	for _, r := range prompt {
		if r < 0x80 {
			esc.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&esc, `\u%04x`, u)
		}
	}
	text := `Input validation error: {"messages": [{"role": "user", "content": "` + esc.String() + `"}]}`
	if !Echoes(text, sources(prompt)) {
		t.Errorf("the escaped echo was not found: %s", text)
	}
	if Echoes(`Input validation error: {"messages": "\u4e00\u4e8c\u4e09\u56db\u4e94\u516d\u4e03\u516b\u4e5d\u5341"}`, sources(prompt)) {
		t.Error("an escaped text the request does not hold was taken for an echo")
	}
	if got := unescapeJSON(`a\"b\\c\/d\ne\u00e9\ud83d\ude00\uZZZZ\`); got != "a\"b\\c/d e\u00e9😀\\uZZZZ\\" {
		t.Errorf("unescapeJSON = %q", got)
	}
}
