package providers

import (
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// scanner walks a JSON text. Every method fails (returns false) on what it
// does not expect, on invalid JSON, and on valid JSON it is not sure to
// read as encoding/json would.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	if s.i < len(s.b) && s.b[s.i] > ' ' {
		return // no white space: what providers send, between every token
	}
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	s.space()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// literal consumes lit if it comes next.
func (s *scanner) literal(lit string) bool {
	if s.peek() == lit[0] && len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// token consumes the one-byte token c (a bracket, a colon, a comma) if it
// comes next: a chunk has a few dozen of them.
func (s *scanner) token(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) null() bool { return s.literal("null") }

// object reads an object, calling field with each key (a plain string) and
// the scanner at the key's value, which field must consume.
func (s *scanner) object(field func(key []byte) bool) bool {
	if !s.token('{') {
		return false
	}
	if s.token('}') {
		return true
	}
	for {
		if s.peek() != '"' {
			return false
		}
		key, ok := s.plainString()
		if !ok || !s.token(':') || !field(key) {
			return false
		}
		if s.token(',') {
			continue
		}
		return s.token('}')
	}
}

// array reads an array, calling elem at each element, which elem must
// consume.
func (s *scanner) array(elem func() bool) bool {
	if !s.token('[') {
		return false
	}
	if s.token(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if s.token(',') {
			continue
		}
		return s.token(']')
	}
}

// plainString reads a string with no escape, no control character and
// valid UTF-8, which is the string encoding/json reads too, and returns its
// bytes. On any other string it fails and consumes nothing.
func (s *scanner) plainString() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	ascii := true
	for j := s.i + 1; j < len(s.b); j++ {
		switch b := s.b[j]; {
		case b == '"':
			raw := s.b[s.i+1 : j]
			if !ascii && !utf8.Valid(raw) {
				return nil, false
			}
			s.i = j + 1
			return raw, true
		case b == '\\' || b < 0x20:
			return nil, false
		case b >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// str reads a string value: a plain one directly, one with escapes by
// unescape, and any other (invalid UTF-8, a lone surrogate) through
// encoding/json, so that it reads exactly as there. Escapes are common (a
// line break in the text), and encoding/json goes 1.4 KB deeper than the
// scanner, under a stream's read loop, where the goroutine must stay
// under 7 KB deep to keep an 8 KB stack (issue 22).
func (s *scanner) str() (string, bool) {
	if raw, ok := s.plainString(); ok {
		return string(raw), true
	}
	v, ok := s.escaped()
	return string(v), ok
}

// text reads a string value as str does, into bytes: a plain string's are
// the scanner's own, valid only as long as what it scans. A chunk's text
// is copied once, where the stream keeps it (streamAcc.take), not first
// into a string of its own (issue 22).
func (s *scanner) text() ([]byte, bool) {
	if raw, ok := s.plainString(); ok {
		return raw, true
	}
	return s.escaped()
}

// escaped reads a string value plainString would not.
func (s *scanner) escaped() ([]byte, bool) {
	start := s.i
	if !s.skipString() {
		return nil, false
	}
	if v, ok := unescape(s.b[start+1 : s.i-1]); ok {
		return v, true
	}
	var v string
	if json.Unmarshal(s.b[start:s.i], &v) != nil {
		return nil, false
	}
	return []byte(v), true
}

// unescape decodes the inside of a JSON string that skipString accepted.
// It gives up (false) on invalid UTF-8 and on a \u escape of a surrogate
// that is not half of a valid pair, which encoding/json replaces.
func unescape(raw []byte) ([]byte, bool) {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			if i+1 >= len(raw) {
				return nil, false
			}
			switch e := raw[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(raw[i+2:])
				if !ok {
					return nil, false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if len(raw) < i+6 || raw[i] != '\\' || raw[i+1] != 'u' {
						return nil, false
					}
					r2, ok := hex4(raw[i+2:])
					if r = utf16.DecodeRune(r, r2); !ok || r == utf8.RuneError {
						return nil, false
					}
					i += 6
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return nil, false
			}
			i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n == 1 {
				return nil, false
			}
			out = append(out, raw[i:i+n]...)
			i += n
		}
	}
	return out, true
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// skipString consumes a valid string.
func (s *scanner) skipString() bool {
	if s.peek() != '"' {
		return false
	}
	for j := s.i + 1; j < len(s.b); j++ {
		switch b := s.b[j]; {
		case b == '"':
			s.i = j + 1
			return true
		case b < 0x20:
			return false
		case b == '\\':
			j++
			if j >= len(s.b) {
				return false
			}
			switch s.b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(s.b) {
					return false
				}
				for _, h := range s.b[j+1 : j+5] {
					if !isHex(h) {
						return false
					}
				}
				j += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

// integer reads a number with no fraction and no exponent, of at most 18
// digits, into *v when v is not nil.
func (s *scanner) integer(v *int) bool {
	s.space()
	j, neg := s.i, false
	if j < len(s.b) && s.b[j] == '-' {
		neg = true
		j++
	}
	n, digits := 0, 0
	for ; j < len(s.b) && '0' <= s.b[j] && s.b[j] <= '9'; j++ {
		if digits > 0 && n == 0 {
			return false // a leading zero
		}
		n = n*10 + int(s.b[j]-'0')
		digits++
	}
	if digits == 0 || digits > 18 || (j < len(s.b) && (s.b[j] == '.' || s.b[j] == 'e' || s.b[j] == 'E')) {
		return false
	}
	if neg {
		n = -n
	}
	if v != nil {
		*v = n
	}
	s.i = j
	return true
}

// skipNumber consumes a valid number.
func (s *scanner) skipNumber() bool {
	s.space()
	j := s.i
	if j < len(s.b) && s.b[j] == '-' {
		j++
	}
	digits := func() int {
		k := j
		for j < len(s.b) && '0' <= s.b[j] && s.b[j] <= '9' {
			j++
		}
		return j - k
	}
	switch {
	case j < len(s.b) && s.b[j] == '0':
		j++
	case digits() == 0:
		return false
	}
	if j < len(s.b) && s.b[j] == '.' {
		j++
		if digits() == 0 {
			return false
		}
	}
	if j < len(s.b) && (s.b[j] == 'e' || s.b[j] == 'E') {
		j++
		if j < len(s.b) && (s.b[j] == '+' || s.b[j] == '-') {
			j++
		}
		if digits() == 0 {
			return false
		}
	}
	s.i = j
	return true
}

// skip consumes any valid value, nested at most 16 deep.
func (s *scanner) skip(depth int) bool {
	if depth > 16 {
		return false
	}
	switch c := s.peek(); {
	case c == '"':
		return s.skipString()
	case c == '{':
		return s.object(func([]byte) bool { return s.skip(depth + 1) })
	case c == '[':
		return s.array(func() bool { return s.skip(depth + 1) })
	case c == '-' || '0' <= c && c <= '9':
		return s.skipNumber()
	}
	return s.literal("true") || s.literal("false") || s.null()
}
