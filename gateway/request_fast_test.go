package gateway

import (
	"reflect"
	"testing"
)

// fastChatBodies are requests of the shape fastChat decodes: each must be
// decoded by it, to what encoding/json makes of it.
var fastChatBodies = []string{
	`{"model":"support","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"support","stream":true,"messages":[{"role":"system","content":"Answer briefly."},{"role":"user","content":"What did you charge me for last month?"}]}`,
	`{"messages":[{"role":"user","content":"hi"}],"stream":false,"stream_options":{"include_usage":true},"model":"support"}`,
	` { "model" : "support" , "stream_options" : { } , "messages" : [ ] } ` + "\n",
	`{"model":"support","messages":[{"content":"a \"quoted\" line\nand a tab\t, \u00e9t\u00E9, \ud83d\ude00, \/ \\ \b\f\r","role":"user"},{}]}`,
	`{"model":"support","messages":[{"role":"user","content":"caf` + "\xc3\xa9 \xff\xfe" + `"}]}`,
	`{"model":"","messages":[{"role":"","content":""}]}`,
	`{"stream":true}`,
}

// slowChatBodies are requests fastChat leaves to encoding/json: another
// key or type, a key in another case, written with escapes or given twice,
// null, and malformed bodies.
var slowChatBodies = []string{
	`{}`,
	`{"model":"support","temperature":0.2,"messages":[{"role":"user","content":"hi"}]}`,
	`{"Model":"support","messages":[{"role":"user","content":"hi"}]}`,
	`{"mod\u0065l":"support","messages":[]}`,
	`{"model":"support","model":"other","messages":[]}`,
	`{"model":"support","messages":[{"role":"user","role":"tool","content":"hi"}]}`,
	`{"model":"support","messages":[{"role":"user","content":"hi","name":"ann"}]}`,
	`{"model":"support","messages":[{"role":"user","content":null}]}`,
	`{"model":"support","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
	`{"model":"sup\u0070ort","messages":[]}`,
	"{\"model\":\"sup\xffport\",\"messages\":[]}",
	`{"model":"support","messages":null}`,
	`{"model":"support","stream":null}`,
	`{"model":"support","stream":1}`,
	`{"model":"support","stream_options":{"include_usage":true,"x":1}}`,
	`{"model":"support","messages":[{"role":"user","content":"a	tab"}]}`,
	`{"model":"support","messages":[{"role":"user","content":"\x"}]}`,
	`{"model":"support","messages":[{"role":"user","content":"\u12"}]}`,
	`{"model":"support","messages":[{"role":"user","content":"hi"}]}x`,
	`{"model":"support","messages":[{"role":"user","content":"hi"},]}`,
	`{"model":"support",}`,
	`{"model":"support"`,
	`["model"]`,
	"\xef\xbb\xbf{\"model\":\"support\"}",
}

// TestFastChat: what fastChat decodes, it decodes as encoding/json does;
// what it does not, it leaves alone.
func TestFastChat(t *testing.T) {
	for _, body := range fastChatBodies {
		got, ok := fastChat([]byte(body))
		if !ok {
			t.Errorf("fastChat left %s to encoding/json", body)
			continue
		}
		sameAsEncodingJSON(t, []byte(body), got)
	}
	for _, body := range slowChatBodies {
		if _, ok := fastChat([]byte(body)); ok {
			t.Errorf("fastChat decoded %s", body)
		}
	}
}

// sameAsEncodingJSON fails t unless encoding/json accepts body and makes
// fast of it.
func sameAsEncodingJSON(t *testing.T, body []byte, fast *chatRequest) {
	t.Helper()
	want, err := unmarshalChat(body)
	if err != nil {
		t.Fatalf("fastChat decoded %q, which encoding/json refuses: %v", body, err)
	}
	if !reflect.DeepEqual(fast, want) {
		t.Fatalf("%q:\nfastChat      %#v\nencoding/json %#v", body, fast, want)
	}
}

// FuzzFastChatRequest holds fastChat to encoding/json: every body it
// decodes, encoding/json decodes to the same request.
func FuzzFastChatRequest(f *testing.F) {
	for _, b := range fastChatBodies {
		f.Add([]byte(b))
	}
	for _, b := range slowChatBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if fast, ok := fastChat(body); ok {
			sameAsEncodingJSON(t, body, fast)
		}
	})
}
