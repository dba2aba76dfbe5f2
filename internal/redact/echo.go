package redact

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// A provider's error text sometimes echoes the request it was sent (a 500
// that dumps the body, a 400 that quotes a message). With content capture
// off, prompts must not reach logs, spans or clients that way, so before a
// provider's text is shown it is checked against the request's text.
//
// The check compares normalized text (ASCII letters and digits lowercased,
// other ASCII dropped, UTF-8 bytes kept), so that JSON escaping and
// whitespace do not hide an echo, and looks for any run of echoWindow
// normalized bytes shared by the error text and the request. Short
// request texts are looked for whole. It reads each request text once
// (a rolling hash), so it costs O(request) on the error path only.

// echoWindow is the length of a shared run that counts as an echo: about
// four words, long enough that ordinary error wording does not match a
// prompt by chance.
const echoWindow = 20

// minWhole is the shortest request text (normalized) looked for whole when
// it is shorter than echoWindow.
const minWhole = 8

// maxEchoText bounds how much of an error text is checked; longer texts
// are cut to it by their callers before being shown anyway.
const maxEchoText = 8 << 10

// Echoes reports whether text shares a run of echoWindow normalized bytes
// with one of the texts sources yields, or holds one of them whole when it
// is short.
func Echoes(text string, sources func(yield func(string) bool)) bool {
	if len(text) > maxEchoText {
		text = text[:maxEchoText]
	}
	norm := normalize(nil, unescapeJSON(text))
	if len(norm) < minWhole {
		return false
	}
	windows := make(map[uint64]struct{}, len(norm))
	if len(norm) >= echoWindow {
		var r roller
		for i, c := range norm {
			r.push(c)
			if i >= echoWindow-1 {
				windows[r.h] = struct{}{}
			}
		}
	}
	found := false
	sources(func(src string) bool {
		if echoesOne(norm, windows, src) {
			found = true
			return false
		}
		return true
	})
	return found
}

// echoesOne checks one request text.
func echoesOne(norm []byte, windows map[uint64]struct{}, src string) bool {
	var r roller
	n := 0
	var short []byte
	for i := 0; i < len(src); i++ {
		c, ok := normByte(src[i])
		if !ok {
			continue
		}
		if n < echoWindow {
			short = append(short, c)
		}
		n++
		r.push(c)
		if n >= echoWindow {
			if _, hit := windows[r.h]; hit && len(windows) > 0 {
				return true
			}
		}
	}
	if n < echoWindow && n >= minWhole {
		return contains(norm, short)
	}
	return false
}

// roller is a polynomial rolling hash over the last echoWindow bytes.
type roller struct {
	h   uint64
	buf [echoWindow]byte
	n   int
}

const hashBase = 1099511628211

// hashOut is hashBase^(echoWindow-1), the weight of the byte that leaves.
var hashOut = func() uint64 {
	p := uint64(1)
	for range echoWindow - 1 {
		p *= hashBase
	}
	return p
}()

func (r *roller) push(c byte) {
	i := r.n % echoWindow
	if r.n >= echoWindow {
		r.h -= uint64(r.buf[i]) * hashOut
	}
	r.buf[i] = c
	r.h = r.h*hashBase + uint64(c)
	r.n++
}

// normalize appends the normalized bytes of s to dst.
func normalize(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c, ok := normByte(s[i]); ok {
			dst = append(dst, c)
		}
	}
	return dst
}

// normByte lowercases ASCII letters, keeps digits and non-ASCII bytes, and
// drops the rest of ASCII (spaces, punctuation, escapes' backslashes).
func normByte(c byte) (byte, bool) {
	switch {
	case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c >= 0x80:
		return c, true
	case c >= 'A' && c <= 'Z':
		return c + 'a' - 'A', true
	}
	return 0, false
}

func contains(s, sub []byte) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if string(s[i:i+len(sub)]) == string(sub) {
			return true
		}
	}
	return false
}

// unescapeJSON replaces the escapes of JSON strings in s by what they stand
// for, so that a request echoed as JSON normalizes as the request does:
// Python's json.dumps, for one, writes every character outside ASCII as
// \uXXXX, which would otherwise normalize to letters and digits that the
// request does not hold. \n and the other control escapes become a space.
func unescapeJSON(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		switch e := s[i+1]; e {
		case 'u':
			r, n := readU(s[i:])
			if n == 0 {
				b.WriteByte(c)
				continue
			}
			b.WriteRune(r)
			i += n - 1
		case 'n', 't', 'r', 'b', 'f':
			b.WriteByte(' ')
			i++
		case '"', '\\', '/':
			b.WriteByte(e)
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// readU reads the \uXXXX at the start of s, and the low surrogate's that
// follows a high one: the rune and how many bytes it took, 0 when s does
// not start with one.
func readU(s string) (rune, int) {
	hex4 := func(s string) (rune, bool) {
		if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(s[2:6], 16, 16)
		return rune(v), err == nil
	}
	r, ok := hex4(s)
	if !ok {
		return 0, 0
	}
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	if lo, ok := hex4(s[6:]); ok {
		if d := utf16.DecodeRune(r, lo); d != utf8.RuneError {
			return d, 12
		}
	}
	return utf8.RuneError, 6
}
