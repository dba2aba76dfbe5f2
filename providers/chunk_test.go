package providers

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// chunkSeeds are chunks as providers send them, and near misses.
var chunkSeeds = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"aB3"}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":" word"},"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	`{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":24,"completion_tokens":10,"total_tokens":34}}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":24,"completion_tokens":10,"total_tokens":34,"prompt_tokens_details":{"cached_tokens":8,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":3,"audio_tokens":0,"accepted_prediction_tokens":1,"rejected_prediction_tokens":2}}}`,
	`{"id":"x","choices":[],"usage":{"prompt_tokens":null,"total_tokens":5,"prompt_tokens_details":null,"completion_tokens_details":{"future_tokens":{"a":1}}}}`,
	`{"id":"x","choices":[],"usage":{"prompt_tokens":1,"prompt_tokens":2}}`,
	`{"id":"x","choices":[],"usage":{"Prompt_Tokens":1}}`,
	`{"id":"x","choices":[],"usage":{"prompt_tokens":1.5}}`,
	`{"id":"x","choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":1},"prompt_tokens_details":{"audio_tokens":2}}}`,
	`{"id":"x","choices":[],"usage":{"completion_tokens_details":{"Reasoning_tokens":1}}}`,
	`{"id":"x","choices":[],"usage":{}}`,
	`{"id":"x","choices":[],"usage":{"total_tokens":3},"usage":{"prompt_tokens":1}}`,
	`{"id":"x","choices":[],"usage":[]}`,
	`{"id":"x","choices":[],"usage":{"total_tokens":3},"usage":null}`,
	`{"id":"x","choices":[{"index":0,"delta":{"content":"line one\nline two\t\"quoted\" \\ back \/ slash \u00e9\u4e16 \ud83d\ude00 \u0041"}}]}`,
	`{"id":"x","choices":[{"delta":{"content":"lone \ud83d surrogate"}}]}`,
	`{"id":"x","choices":[{"delta":{"content":"lone \ude00 low, then \ud83d\u0041"}}]}`,
	`{"id":"x","choices":[{"delta":{"content":"bad \u12G4 hex"}}]}`,
	`{"id":"x","choices":[{"delta":{"content":"é \xff with an escape\n"}}]}`,
	`{"id":"x","choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":1},"prompt_tokens_details":null}}`,
	`{"id":"x","choices":[],"usage":{"completion_tokens_details":{"reasoning_tokens":1},"completion_tokens_details":null}}`,
	`{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`,
	`{"id":"x","choices":[{"index":1,"delta":{"content":"a"}},{"index":0,"delta":{"content":"b"}}]}`,
	` { "id" : "x" , "choices" : [ { "index" : 0 , "delta" : { "content" : "a\nb \"q\" \u00e9\ud83d\ude00" } } ] } `,
	`{"id":"x","choices":[{"delta":{"content":"héllo, 世界 🙂"}}]}`,
	`{"id":"x","choices":[{"delta":{"content":"bad \xff utf-8"}}]}`,
	`{"ID":"x","choices":[{"delta":{"Content":"case"}}]}`,
	`{"id":"x","choices":[{"delta":{"content":"a","content":"b"}}]}`,
	`{"id":"x","choices":[{"index":0.5,"delta":{"content":"a"}}]}`,
	`{"id":"x","choices":[{"index":1e2,"delta":{"content":"a"}}]}`,
	`{"id":"x","choices":[{"index":007,"delta":{"content":"a"}}]}`,
	`{"id":"x","choices":[{"index":-3,"delta":{"content":"a"}}]}`,
	`{"id":"x","created":"soon","choices":[]}`,
	`{"id":"x","choices":[{"delta":{"content":5}}]}`,
	`{"id":"x","choices":null}`,
	`{"id":null,"choices":[null]}`,
	`{"id":"x","choices":[{"delta":null,"finish_reason":"length"}]}`,
	`{"id":"x","choices":[],"extra":{"a":[1,2,{"b":true,"c":false,"d":null}],"e":-1.5e+3,"f":"\/\b\f\r\t"}}`,
	`{"id":"x","choices":[]} trailing`,
	`{"id":"x","choices":[],}`,
	`{"id":"x","choices":[{"delta":{"content":"a"}}],"choices":[]}`,
	`{"id":"x","choices":[{"content_filter_results":{"hate":{"filtered":false}},"delta":{"content":"a"}}]}`,
	`{"id":"x","choices":[{"logprobs":{"content":[]},"delta":{"content":"a"}}]}`,
	`{"id":"x","choices":[{"delta":{"reasoning_content":"think","content":"a"}}]}`,
	`{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":"I can\u2019t help with that."}}]}`,
	`{"id":"x","choices":[{"delta":{"refusal":"no","content":"a"}}]}`,
	`{"id":"x","choices":[{"delta":{"content":"a","refusal":"no","content":""}}]}`,
	`{"id":"x","choices":[{"delta":{"refusal":"no","refusal":null}}]}`,
	`{"id":"x","extra":"\q","choices":[]}`,
	`{"id":"x","extra":"\u12","choices":[]}`,
	`{"id":"x","extra":01,"choices":[]}`,
	`{"id":"x","extra":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]],"choices":[]}`,
	`{"id":"x","ſ":1,"choices":[]}`,
	`{"id":"x","choices":[{"delta":{"content":"tab	inside"}}]}`,
	`[]`,
	``,
	`{`,
}

// TestDecodeChunkReadsAsEncodingJSON takes every seed into a stream
// assembler by readChunk and by encoding/json into go-openai's type (as
// go-openai itself decodes), and compares what the assembler holds after.
func TestDecodeChunkReadsAsEncodingJSON(t *testing.T) {
	fast := 0
	for _, seed := range chunkSeeds {
		if sameChunk(t, []byte(seed)) {
			fast++
		}
	}
	// The common chunks must take the fast path, or it is dead code.
	escaped := ` { "id" : "x" , "choices" : [ { "index" : 0 , "delta" : { "content" : "a\nb \"q\" \u00e9\ud83d\ude00" } } ] } `
	if !slices.Contains(chunkSeeds, escaped) {
		t.Fatal("the escaped seed is gone")
	}
	for _, seed := range append(chunkSeeds[:5:5], escaped) { // role, text, finish, usage and its details, escaped text
		for _, wantID := range []bool{true, false} {
			var f chunkRead
			if !readChunk([]byte(seed), &f, wantID) {
				t.Errorf("readChunk gave up on a plain chunk: %s", seed)
			}
		}
	}
	if fast < 10 {
		t.Errorf("only %d seeds read by readChunk", fast)
	}
}

// TestTakeChunkAfterEncodingJSON: a chunk encoding/json decodes (a tool
// call's) into the spare chunk leaves nothing of itself for the next one.
func TestTakeChunkAfterEncodingJSON(t *testing.T) {
	var acc streamAcc
	var spare openai.ChatCompletionStreamResponse
	var deltas []string
	onDelta := func(d string) { deltas = append(deltas, d) }
	for _, chunk := range []string{
		`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"xy","tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null},{"index":1}]}`,
		`{"id":"chatcmpl-2","choices":[{"index":0,"delta":{"content":"a"}},{"index":0,"delta":{"content":"b"}}]}`,
		`{"id":"chatcmpl-2","choices":[{"index":0,"delta":{}}]}`,
		`{"id":"chatcmpl-2","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	} {
		if err := acc.takeChunk([]byte(chunk), &spare, onDelta); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := accSummary(&acc, deltas), `id="chatcmpl-1" text="xyab" finish="tool_calls" usage=<nil> chunks=4 calls=1 deltas=["xy" "a" "b"]`; got != want {
		t.Errorf("assembled %s\nwant      %s", got, want)
	}
}

// TestReadChunkAllocations: a text chunk allocates its text, and its id
// only while the stream has none.
func TestReadChunkAllocations(t *testing.T) {
	text := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hello"},"finish_reason":null}]}`)
	for _, c := range []struct {
		wantID bool
		allocs float64
	}{{false, 0}, {true, 1}} {
		n := testing.AllocsPerRun(100, func() {
			var f chunkRead
			if !readChunk(text, &f, c.wantID) {
				t.Fatal("readChunk gave up")
			}
		})
		if n > c.allocs {
			t.Errorf("wantID %v: a text chunk took %v allocations, want at most %v", c.wantID, n, c.allocs)
		}
	}
}

// TestDeltasOutliveTheirChunk: a text chunk's delta is read from the
// event reader's buffer, which the next event overwrites, and handed over
// as the tail of the stream's text, which grows: each delta must stay as it
// was handed over.
func TestDeltasOutliveTheirChunk(t *testing.T) {
	var acc streamAcc
	var spare openai.ChatCompletionStreamResponse
	var deltas, want []string
	buf := make([]byte, 0, 256)
	for i := range 200 {
		piece := fmt.Sprintf("w%d ", i)
		if i%7 == 0 {
			piece += `\n` // escaped: read into bytes of its own
		}
		buf = append(buf[:0], `{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"`+piece+`"}}]}`...)
		if err := acc.takeChunk(buf, &spare, func(d string) { deltas = append(deltas, d) }); err != nil {
			t.Fatal(err)
		}
		clear(buf[:cap(buf)])
		want = append(want, strings.ReplaceAll(piece, "\\n", "\n"))
	}
	if !slices.Equal(deltas, want) {
		t.Fatalf("deltas changed after they were handed over:\n%q\nwant\n%q", deltas, want)
	}
	if got := acc.text.String(); got != strings.Join(want, "") {
		t.Fatalf("text %q, want %q", got, strings.Join(want, ""))
	}
}

// FuzzDecodeChunk holds readChunk to encoding/json on any input: when it
// reads one, encoding/json must read it too, to the same assembler.
//
//	go test ./providers -run '^$' -fuzz '^FuzzDecodeChunk$' -fuzztime 5m
func FuzzDecodeChunk(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameChunk(t, data)
		for _, prev := range []string{"", "chatcmpl-0"} {
			got, err := takenBy(data, prev, true)
			want, wantErr := takenBy(data, prev, false)
			if (err == nil) != (wantErr == nil) || (err == nil && got != want) {
				t.Fatalf("%q after %q: takeChunk made %s (%v), encoding/json %s (%v)", data, prev, got, err, want, wantErr)
			}
		}
	})
}

// sameChunk fails t when readChunk reads data other than encoding/json
// does, into an assembler with no id yet and into one with one; it reports
// whether readChunk read it.
func sameChunk(t *testing.T, data []byte) bool {
	t.Helper()
	read := false
	for _, prev := range []string{"", "chatcmpl-0"} {
		acc := streamAcc{id: prev}
		var f chunkRead
		if !readChunk(data, &f, prev == "") {
			if read {
				t.Fatalf("%q: readChunk read it for a stream without an id, not after %q", data, prev)
			}
			continue
		}
		if prev == "" {
			read = true
		}
		var deltas []string
		acc.take(&f, func(d string) { deltas = append(deltas, d) })
		got := accSummary(&acc, deltas)
		want, err := takenBy(data, prev, false)
		if err != nil {
			t.Fatalf("%q: readChunk made %s, encoding/json failed: %v", data, got, err)
		}
		if got != want {
			t.Fatalf("%q after %q: readChunk made %s, encoding/json %s", data, prev, got, want)
		}
	}
	return read
}

// takenBy is the assembler, with id prev before, after it takes data:
// through takeChunk (fast), or decoded by encoding/json and added.
func takenBy(data []byte, prev string, fast bool) (string, error) {
	acc := streamAcc{id: prev}
	var deltas []string
	onDelta := func(d string) { deltas = append(deltas, d) }
	if fast {
		var spare openai.ChatCompletionStreamResponse
		if err := acc.takeChunk(data, &spare, onDelta); err != nil {
			return "", err
		}
	} else {
		var c openai.ChatCompletionStreamResponse
		if err := json.Unmarshal(data, &c); err != nil {
			return "", err
		}
		acc.add(&c, onDelta)
	}
	return accSummary(&acc, deltas), nil
}

// accSummary is what an assembler holds, and the deltas it handed over.
func accSummary(s *streamAcc, deltas []string) string {
	usage := "<nil>"
	if u := s.usage; u != nil {
		usage = fmt.Sprintf("{%d %d %d %+v %+v}", u.PromptTokens, u.CompletionTokens, u.TotalTokens,
			u.PromptTokensDetails, u.CompletionTokensDetails)
	}
	return fmt.Sprintf("id=%q text=%q finish=%q usage=%s chunks=%d calls=%d deltas=%q",
		s.id, s.text.String(), s.finish, usage, s.chunks, len(s.calls), deltas)
}

// TestUnescapeReadsAsEncodingJSON: the escapes a model's text is full of
// (line breaks, quotes, \u escapes and surrogate pairs) are decoded by
// unescape, on the stream's goroutine, to what encoding/json reads; what
// it is not sure of (a lone surrogate, invalid UTF-8) it leaves to it.
func TestUnescapeReadsAsEncodingJSON(t *testing.T) {
	for _, c := range []struct {
		raw  string
		fast bool
	}{
		{`line one\nline two\t\"quoted\" \\ back \/ slash \u00e9\u4E16 \ud83d\ude00 \u0041 \b\f\r`, true},
		{`plain`, true},
		{`héllo \n 世界`, true},
		{`lone \ud83d surrogate`, false},
		{`lone \ude00 low`, false},
		{`\ud83d\u0041`, false},
		{"bad \xff byte\\n", false},
	} {
		got, ok := unescape([]byte(c.raw))
		if ok != c.fast {
			t.Errorf("%q: unescape ok = %v, want %v", c.raw, ok, c.fast)
		}
		var want string
		if err := json.Unmarshal([]byte(`"`+c.raw+`"`), &want); err != nil {
			t.Fatalf("%q: %v", c.raw, err)
		}
		if ok && string(got) != want {
			t.Errorf("%q: unescape %q, encoding/json %q", c.raw, got, want)
		}
	}
}

// FuzzUnescape holds unescape to encoding/json on any string it accepts.
func FuzzUnescape(f *testing.F) {
	for _, s := range []string{`a\nb`, `\u00e9\ud83d\ude00`, `\ud83d`, "x\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := unescape(raw)
		if !ok {
			return
		}
		var want string
		if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &want); err != nil {
			// unescape reads only what skipString accepted: a quote or a
			// control byte inside is not its input.
			return
		}
		if string(got) != want {
			t.Fatalf("%q: unescape %q, encoding/json %q", raw, got, want)
		}
	})
}
