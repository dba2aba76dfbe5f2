package providers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	openai "github.com/sashabaranov/go-openai"
)

// goOpenAIEvents reads body with go-openai's own stream reader: every
// payload and the error that ends the stream.
func goOpenAIEvents(t testing.TB, body []byte) (payloads []string, end error) {
	cfg := openai.DefaultConfig("k")
	cfg.BaseURL = "http://events.invalid/v1"
	cfg.HTTPClient = &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(body)), Request: req}, nil
	})}
	st, err := openai.NewClientWithConfig(cfg).CreateChatCompletionStream(t.Context(), openai.ChatCompletionRequest{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return readEvents(t, "go-openai's reader", st.RecvRaw)
}

// ourEvents reads body with eventReader.
func ourEvents(t testing.TB, body []byte) (payloads []string, end error) {
	return readEvents(t, "eventReader", newEventReader(bytes.NewReader(body), nil).next)
}

// readEvents calls next until it fails: the payloads and the error.
func readEvents(t testing.TB, reader string, next func() ([]byte, error)) (payloads []string, end error) {
	for range 10000 {
		raw, err := next()
		if err != nil {
			return payloads, err
		}
		payloads = append(payloads, string(raw))
	}
	t.Fatalf("%s did not end", reader)
	return nil, nil
}

// sameEvents checks that both readers read body alike.
func sameEvents(t testing.TB, body []byte) {
	want, wantErr := goOpenAIEvents(t, body)
	got, gotErr := ourEvents(t, body)
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("body %q:\n go-openai read %q, then %v\n eventReader read %q, then %v", body, want, wantErr, got, gotErr)
	}
	var apiErr *openai.APIError
	if errors.As(wantErr, &apiErr) != errors.As(gotErr, &apiErr) {
		t.Fatalf("body %q: go-openai's end %v and ours %v differ in carrying an *openai.APIError", body, wantErr, gotErr)
	}
}

// TestEventReaderReadsAsGoOpenAI compares eventReader with go-openai's stream
// reader on hand-written bodies and on FuzzStreamParse's corpus.
func TestEventReaderReadsAsGoOpenAI(t *testing.T) {
	bodies := []string{
		"data: {\"a\":1}\n\ndata: [DONE]\n\n",
		"data:{\"a\":1}\r\n\r\ndata:  \t[DONE]\r\n",
		"event: message\ndata: {\"a\":1}\n\n: keep-alive\n\ndata: {\"b\":2}\n",
		"data: {\"a\":1}", // the last line has no newline
		"data: {\"error\": {\"message\": \"overloaded\", \"type\": \"server_error\"}}\n\n",
		"data: {\"error\": null}\n\ndata: {\"a\":1}\n\n",
		"{\"error\": {\"message\": \"bad key\", \"code\": \"invalid_api_key\"}}\n",
		"<html>\n<body>502 Bad Gateway</body>\n</html>\n",
		"data: [DONE]\n\ndata: {\"a\":1}\n\n",
		"data: " + strings.Repeat("x", 10000) + "\n\ndata: {\"a\":1}\n",
		strings.Repeat("\n", 299) + "data: {\"a\":1}\n",
		strings.Repeat("\n", 301) + "data: {\"a\":1}\n",
		"",
	}
	for i, b := range bodies {
		t.Run(strconv.Itoa(i), func(t *testing.T) { sameEvents(t, []byte(b)) })
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzStreamParse")
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(f.Name(), func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			body, err := corpusBytes(raw)
			if err != nil {
				t.Fatal(err)
			}
			sameEvents(t, body)
		})
	}
}

// FuzzEventReader checks that eventReader reads any body as go-openai's
// stream reader does:
//
//	go test ./providers -run '^$' -fuzz '^FuzzEventReader$' -fuzztime 10m
func FuzzEventReader(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"error\": {\"message\": \"x\"}}\n\n"))
	f.Add([]byte(": ping\r\nevent: x\r\ndata:{}\r\n"))
	f.Fuzz(func(t *testing.T, body []byte) { sameEvents(t, body) })
}

// corpusBytes reads a `go test fuzz v1` file holding one []byte.
func corpusBytes(raw []byte) ([]byte, error) {
	_, rest, ok := strings.Cut(string(raw), "\n")
	if !ok {
		return nil, errors.New("not a fuzz corpus file")
	}
	rest = strings.TrimSpace(rest)
	q, ok := strings.CutPrefix(rest, "[]byte(")
	if !ok || !strings.HasSuffix(q, ")") {
		return nil, fmt.Errorf("not a []byte value: %.40q", rest)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(q, ")"))
	return []byte(s), err
}

// arrivals is a stream's body as it comes over the network: each Read
// returns what is left of the current arrival, and a Read once it is used
// up is a wait for the next one, at which it records whether the event
// reader held a buffer.
type arrivals struct {
	parts  [][]byte
	e      *eventReader
	next   int   // the arrival the next wait is for
	heldAt []int // the arrivals waited for with a buffer held
}

func (a *arrivals) Read(b []byte) (int, error) {
	if len(a.parts) > 0 && len(a.parts[0]) == 0 {
		a.parts = a.parts[1:]
		if a.e.r != nil {
			a.heldAt = append(a.heldAt, a.next)
		}
		a.next++
	}
	if len(a.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(b, a.parts[0])
	a.parts[0] = a.parts[0][n:]
	return n, nil
}

// TestEventReaderHoldsNoBufferBetweenEvents: a stream that waits for its
// next event holds no read buffer (issue 22), and events that arrive in
// pieces, or several at once, read as they do from one whole body.
func TestEventReaderHoldsNoBufferBetweenEvents(t *testing.T) {
	ev := func(i int) string {
		return `data: {"id":"c","choices":[{"index":0,"delta":{"content":"word ` + strconv.Itoa(i) + `"}}]}` + "\n\n"
	}
	long := "data: " + strings.Repeat("x", 3*eventBuffer) + "\n\n"
	cases := map[string][]string{
		"one event an arrival": {ev(1), ev(2), ev(3), "data: [DONE]\n\n"},
		"in pieces":            {ev(1)[:7], ev(1)[7:30], ev(1)[30:] + ev(2)[:1], ev(2)[1:], "data: [DO", "NE]\n\n"},
		"several at once":      {ev(1) + ev(2) + ev(3), ev(4) + "data: [DONE]\n\n"},
		"a long line":          {ev(1), long, ev(2), "data: [DONE]\n\n"},
		"no [DONE]":            {ev(1), ev(2)[:20]},
		"an error event":       {ev(1), `data: {"error":{"message":"boom","type":"server_error"}}` + "\n\n"},
	}
	for name, parts := range cases {
		t.Run(name, func(t *testing.T) {
			whole := []byte(strings.Join(parts, ""))
			wantP, wantErr := ourEvents(t, whole)
			if w, _ := goOpenAIEvents(t, whole); !slicesEqual(w, wantP) {
				t.Fatalf("go-openai read %q, the whole body %q", w, wantP)
			}
			a := &arrivals{}
			for _, p := range parts {
				a.parts = append(a.parts, []byte(p))
			}
			a.parts = append([][]byte{{}}, a.parts...) // the first arrival is waited for too
			e := newEventReader(a, nil)
			a.e = e
			gotP, gotErr := readEvents(t, "arrivals", e.next)
			e.close()
			if !slicesEqual(gotP, wantP) || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Errorf("in arrivals: %q, %v; whole: %q, %v", gotP, gotErr, wantP, wantErr)
			}
			if a.next < len(parts) {
				t.Fatalf("%d arrivals waited for, want %d", a.next, len(parts))
			}
			// A wait inside a line may hold the buffer (an event cut in
			// two); one between events may not.
			for _, i := range a.heldAt {
				if i == 0 || strings.HasSuffix(parts[i-1], "\n\n") {
					t.Errorf("arrival %d was waited for with a buffer held", i)
				}
			}
			if e.r != nil {
				t.Error("the buffer was not put back at the end")
			}
		})
	}
}

func slicesEqual(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) && len(a) == len(b) }

// A line of exactly maxLineBytes (its newline aside) is read; one byte more
// fails the call with errTooLarge, wherever the line's end falls in the
// reader's buffer (CONTRACT §14: "one SSE line over 1 MiB").
func TestEventLineLimitIsExact(t *testing.T) {
	for _, extra := range []int{0, 1, eventBuffer / 2, eventBuffer - 1} {
		for _, over := range []bool{false, true} {
			n := maxLineBytes - extra
			if over {
				n = maxLineBytes + 1 + extra
			}
			payload := strings.Repeat("a", n-len("data: "))
			body := []byte("data: " + payload + "\r\n\r\n")
			got, err := ourEvents(t, body)
			if over && !errors.Is(err, errTooLarge) {
				t.Errorf("a line of %d bytes: err %v, want errTooLarge", n, err)
			}
			if !over && (!errors.Is(err, io.EOF) || len(got) != 1 || got[0] != payload) {
				t.Errorf("a line of %d bytes: %d events, err %v; want it read", n, len(got), err)
			}
		}
	}
}

// pieceBody serves its pieces one read at a time, each read at most one
// piece, and logs each read that returns bytes or the end.
type pieceBody struct {
	pieces []string
	log    *[]string
}

func (b *pieceBody) Read(p []byte) (int, error) {
	if len(b.pieces) == 0 {
		*b.log = append(*b.log, "end")
		return 0, io.EOF
	}
	n := copy(p, b.pieces[0])
	*b.log = append(*b.log, "read "+strconv.Quote(b.pieces[0][:n]))
	if b.pieces[0] = b.pieces[0][n:]; b.pieces[0] == "" {
		b.pieces = b.pieces[1:]
	}
	return n, nil
}

// The pauser is called before a read of the body that may wait, once the
// events read so far were handed over, as call.stream hands them: never
// while nothing was handed since it was last called, so not between the
// byte that ends a wait and the rest of its event, nor twice at the end
// (issue 22: that call looked at the run's state, cold by then, for every
// chunk of every stream).
func TestEventReaderPausesOnlyAfterHandingOver(t *testing.T) {
	var log []string
	body := &pieceBody{pieces: []string{"data: A\n\n", "data: B\n\ndata: C\n\n"}, log: &log}
	e := newEventReader(body, pauseFunc(func() { log = append(log, "pause") }))
	defer e.close()
	for {
		data, err := e.next()
		if errors.Is(err, io.EOF) {
			e.src.paused() // as call.stream does before its drain
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, "event "+string(data))
		e.handed()
	}
	want := []string{
		`read "d"`, `read "ata: A\n\n"`, "event A",
		"pause", `read "d"`, `read "ata: B\n\ndata: C\n\n"`, "event B", "event C",
		"pause", "end",
	}
	if strings.Join(log, " | ") != strings.Join(want, " | ") {
		t.Fatalf("the reader did\n %s\nwant\n %s", strings.Join(log, " | "), strings.Join(want, " | "))
	}
}

// TestEventReaderIsOneLine: a stream of data events keeps what it reads of
// its event reader to one cache line, the first of a call's (issue 22);
// what other lines need is made at the first of them.
func TestEventReaderIsOneLine(t *testing.T) {
	var e eventReader
	if at := unsafe.Offsetof(call{}.events); at != 0 {
		t.Errorf("the event reader is at %d in a call, want its first line", at)
	}
	for name, end := range map[string]uintptr{
		"r":     unsafe.Offsetof(e.r) + unsafe.Sizeof(e.r),
		"body":  unsafe.Offsetof(e.src) + unsafe.Offsetof(e.src.body) + unsafe.Sizeof(e.src.body),
		"pause": unsafe.Offsetof(e.src) + unsafe.Offsetof(e.src.pause) + unsafe.Sizeof(e.src.pause),
		"left":  unsafe.Offsetof(e.src) + unsafe.Offsetof(e.src.left) + unsafe.Sizeof(e.src.left),
		"owed":  unsafe.Offsetof(e.src) + unsafe.Offsetof(e.src.owed) + unsafe.Sizeof(e.src.owed),
	} {
		if end > 64 {
			t.Errorf("a chunk reads the event reader's %s, which ends at byte %d, past its first line", name, end)
		}
	}
	read := func(body string) *eventReader {
		e := newEventReader(strings.NewReader(body), nil)
		for {
			if _, err := e.next(); err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("%q: %v", body, err)
				}
				return e
			}
		}
	}
	if e := read("data: {\"a\":1}\n\ndata: {\"a\":2}\r\n\r\ndata: [DONE]\n\n"); e.rare != nil {
		t.Errorf("data events alone made the reader's rare lines: %+v", e.rare)
	}
	if e := read(": keep-alive\n\ndata: {\"a\":1}\n\n"); e.rare == nil || e.rare.other.String() != ": keep-alive" {
		t.Errorf("a comment line was not kept with the rare lines: %+v", e.rare)
	}
}
