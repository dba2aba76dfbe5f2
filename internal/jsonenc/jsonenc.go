// Package jsonenc appends JSON to byte slices without reflection, byte for
// byte as encoding/json writes it. The gateway's stream chunks and the
// providers' request messages are encoded with it: both are on hot paths
// where encoding/json's reflection and fresh buffers showed in profiles.
package jsonenc

import "unicode/utf8"

// hexDigits are the digits of \u escapes.
const hexDigits = "0123456789abcdef"

// safeASCII[c] is '1' for the ASCII bytes written as they are: not a
// control byte, '"', '\\', '<', '>' or '&'. One lookup per byte instead of
// six comparisons: long texts are mostly such bytes.
const safeASCII = "00000000000000000000000000000000110111011111111111111111111101011111111111111111111111111111011111111111111111111111111111111111"

// AppendString appends s to dst as a JSON string exactly as encoding/json
// writes it: <, > and & escaped as \u003c, \u003e and \u0026, U+2028 and
// U+2029 escaped, and each invalid UTF-8 byte replaced by \ufffd.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safeASCII[c] == '1' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default: // other control bytes, <, > and &
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(dst, s[start:]...), '"')
}
