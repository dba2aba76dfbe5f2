package gateway

import (
	"unicode/utf8"

	"github.com/switchboard-ai/switchboard/runtime"
)

// fastChat decodes the most common Chat Completions request without
// reflection: an object of "model", "messages", "stream" and
// "stream_options" ({"include_usage": bool}), whose messages are objects
// of a "role" and a string "content". ok is false for anything else (another
// key, a key in another case or written with escapes, a key given twice,
// null, a number, a malformed body), which encoding/json then decodes, and
// refuses, as always (unmarshalChat).
//
// The messages are only checked and counted where they come, and decoded
// once the whole body is known to be one fastChat reads: a request with a
// key after its messages ("tools", most often, as clients write it) goes
// to encoding/json without having built them first.
//
// What it returns is exactly what encoding/json returns for the same body
// (FuzzFastChatRequest holds it to that). For bench/streams' two-message
// request, decoding and checking took 3.5 µs and 18 allocations with
// encoding/json, 1.7 µs and 8 with fastChat; in a profile of a running
// gateway, with cold caches, the decoding was some 37 µs a request, where
// a stream's whole opening costs the gateway about 80 µs more than a
// reverse proxy's (issue 22).
func fastChat(body []byte) (*chatRequest, bool) {
	d := fastDecoder{b: body}
	req := new(chatRequest)
	if !d.next('{') {
		return nil, false
	}
	var seen uint8
	msgsAt, nMsgs := 0, 0
	for {
		key, ok := d.plain()
		if !ok || !d.next(':') {
			return nil, false
		}
		var bit uint8
		switch string(key) {
		case "model":
			bit = 1
			req.Model, ok = d.str()
		case "messages":
			bit = 2
			msgsAt = d.i
			nMsgs, ok = d.messages(nil)
		case "stream":
			bit = 4
			req.Stream, ok = d.boolean()
		case "stream_options":
			bit = 8
			ok = d.streamOptions(req)
		default:
			return nil, false
		}
		if !ok || seen&bit != 0 {
			return nil, false
		}
		seen |= bit
		if d.next('}') {
			break
		}
		if !d.next(',') {
			return nil, false
		}
	}
	d.space()
	if d.i != len(d.b) {
		return nil, false
	}
	if seen&2 != 0 {
		req.Wire = make([]runtime.WireMessage, nMsgs)
		d.i = msgsAt
		if _, ok := d.messages(req.Wire); !ok {
			return nil, false
		}
	}
	return req, true
}

// fastDecoder reads a JSON body from b[i:].
type fastDecoder struct {
	b []byte
	i int
}

// space skips JSON's white space.
func (d *fastDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next reads the byte c, after white space; false, reading nothing, if
// another comes.
func (d *fastDecoder) next(c byte) bool {
	d.space()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// plain reads a string without escapes, control characters or invalid
// UTF-8, whose text is its bytes; it returns them.
func (d *fastDecoder) plain() ([]byte, bool) {
	if !d.next('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return s, utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		}
		d.i++
	}
	return nil, false
}

// str reads a plain string (plain) as a string.
func (d *fastDecoder) str() (string, bool) {
	s, ok := d.plain()
	return string(s), ok
}

// raw reads a valid JSON string and returns its bytes, quotes included, as
// a json.RawMessage holds it: escapes are checked, not decoded, and other
// bytes are kept as they are (a RawMessage keeps invalid UTF-8 too).
func (d *fastDecoder) raw() ([]byte, bool) {
	if !d.next('"') {
		return nil, false
	}
	start := d.i - 1
	for d.i < len(d.b) {
		c := d.b[d.i]
		d.i++
		switch {
		case c == '"':
			return d.b[start:d.i:d.i], true
		case c < 0x20:
			return nil, false
		case c == '\\':
			if d.i >= len(d.b) {
				return nil, false
			}
			switch d.b[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i++
			case 'u':
				if d.i+5 > len(d.b) {
					return nil, false
				}
				for _, h := range d.b[d.i+1 : d.i+5] {
					if !isHex(h) {
						return nil, false
					}
				}
				d.i += 5
			default:
				return nil, false
			}
		}
	}
	return nil, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// boolean reads true or false.
func (d *fastDecoder) boolean() (bool, bool) {
	d.space()
	rest := d.b[d.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		d.i += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		d.i += 5
		return false, true
	}
	return false, false
}

// streamOptions reads {"include_usage": bool} (or {}) into req.
func (d *fastDecoder) streamOptions(req *chatRequest) bool {
	if !d.next('{') {
		return false
	}
	req.StreamOptions = &struct {
		IncludeUsage bool `json:"include_usage"`
	}{}
	if d.next('}') {
		return true
	}
	key, ok := d.plain()
	if !ok || string(key) != "include_usage" || !d.next(':') {
		return false
	}
	if req.StreamOptions.IncludeUsage, ok = d.boolean(); !ok {
		return false
	}
	return d.next('}')
}

// messages reads an array of messages, each an object of a plain "role"
// and a string "content", into out, and returns how many there are; with
// out nil, it only checks and counts them.
func (d *fastDecoder) messages(out []runtime.WireMessage) (int, bool) {
	if !d.next('[') {
		return 0, false
	}
	if d.next(']') {
		return 0, true
	}
	for n := 0; ; {
		var m *runtime.WireMessage
		if out != nil {
			m = &out[n]
		}
		if !d.message(m) {
			return 0, false
		}
		n++
		if d.next(']') {
			return n, true
		}
		if !d.next(',') {
			return 0, false
		}
	}
}

// message reads one message into m, or only checks it when m is nil.
func (d *fastDecoder) message(m *runtime.WireMessage) bool {
	if !d.next('{') {
		return false
	}
	if d.next('}') {
		return true
	}
	var role, content bool
	for {
		key, ok := d.plain()
		if !ok || !d.next(':') {
			return false
		}
		switch {
		case string(key) == "role" && !role:
			role = true
			var v []byte
			if v, ok = d.plain(); ok && m != nil {
				m.Role = string(v)
			}
		case string(key) == "content" && !content:
			content = true
			var v []byte
			if v, ok = d.raw(); ok && m != nil {
				m.Content = v
			}
		default:
			return false
		}
		if !ok {
			return false
		}
		if d.next('}') {
			return true
		}
		if !d.next(',') {
			return false
		}
	}
}
