package jsonenc

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// trickyStrings are strings whose JSON encoding has a catch.
var trickyStrings = []string{
	"", "plain text", `say "hi"`, `back\slash`, "tab\tnew\nline\rcr",
	"\b\f\x00\x01\x1f\x7f", "<script>alert('x')</script> & more", "line\u2028para\u2029end",
	"Grüße 👋 日本語", "bad \xff byte", "cut \xe2\x82 rune", "\xed\xa0\x80 surrogate", "\xf4\x90\x80\x80 too big",
	"ends in \xc3", "é\u0301 combining", "\ufffd real replacement char", strings.Repeat("x<", 100),
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	check := func(s string) {
		t.Helper()
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("prefix"), s); string(got) != "prefix"+string(want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got[len("prefix"):], want)
		}
	}
	for _, s := range trickyStrings {
		check(s)
	}
	for c := range 256 { // every byte alone, and inside plain text
		check(string([]byte{byte(c)}))
		check("ab" + string([]byte{byte(c)}) + "cd")
	}
	// Random strings, mostly of the bytes that matter: ASCII specials,
	// control bytes and pieces of multi-byte runes, valid or not.
	alphabet := []byte("ab\"\\<>&\n\t\x00\x1f\x7f\xc3\xa9\xe2\x80\xa8\xa9\xf0\x9f\x91\x8b\xff\xed\xa0")
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		check(string(b))
	}
}

func BenchmarkAppendString(b *testing.B) {
	s := strings.Repeat("The refund for order 1234 was issued on Monday; \"see\" the <ticket>. Grüße! ", 14)
	b.SetBytes(int64(len(s)))
	var buf []byte
	for b.Loop() {
		buf = AppendString(buf[:0], s)
	}
}

func BenchmarkAppendStringASCII(b *testing.B) {
	s := strings.Repeat("The refund for order 1234 was issued on Monday, see the ticket. ", 16)
	b.SetBytes(int64(len(s)))
	var buf []byte
	for b.Loop() {
		buf = AppendString(buf[:0], s)
	}
}
