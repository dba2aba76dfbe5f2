package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testTrace = "testdata/trace.json"

// row is what a reader sees of one span row in the SVG.
type row struct {
	Class string
	Depth string
	Name  string // the bold name text, with the handoff mark
	Attrs string // the key attribute line
}

// rows parses the SVG (so it must be well-formed XML) and returns its span rows.
func rows(t *testing.T, svg []byte) []row {
	t.Helper()
	var doc struct {
		G []struct {
			Class string `xml:"class,attr"`
			Depth string `xml:"data-depth,attr"`
			Text  []struct {
				Chars string `xml:",chardata"`
			} `xml:"text"`
		} `xml:"g"`
	}
	if err := xml.Unmarshal(svg, &doc); err != nil {
		t.Fatalf("output is not valid SVG/XML: %v", err)
	}
	var out []row
	for _, g := range doc.G {
		if !strings.HasPrefix(g.Class, "span") {
			continue
		}
		r := row{Class: g.Class, Depth: g.Depth}
		if len(g.Text) > 0 {
			r.Name = strings.TrimSpace(g.Text[0].Chars)
		}
		if len(g.Text) > 2 { // name, attributes, duration
			r.Attrs = g.Text[1].Chars
		}
		out = append(out, r)
	}
	return out
}

func TestRenderOneRowPerSpan(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{testTrace}, nil, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	want := []row{
		{"span", "0", "POST /v1/chat/completions", "status=200"},
		{"span", "1", "invoke_agent triage", "agent=triage session=demo-42"},
		{"span", "2", "chat gpt-4o-mini", "tokens=212/31 finish=tool_calls provider=openai"},
		{"span handoff error", "2", "⇄ handoff triage -> refunds", "outcome=invalid_args"},
		{"span", "2", "chat gpt-4o-mini", "tokens=260/24 finish=tool_calls provider=openai"},
		{"span handoff", "2", "⇄ handoff triage -> billing", "outcome=accepted"},
		{"span", "1", "invoke_agent billing", "agent=billing session=demo-42"},
		{"span", "2", "chat gpt-4o-mini", "tokens=301/19 finish=tool_calls provider=openai"},
		{"span", "2", "execute_tool lookup_charges", "tool=lookup_charges"},
		{"span", "2", "chat gpt-4o-mini", "tokens=388/57 finish=stop provider=openai"},
	}
	if diff := cmp.Diff(want, rows(t, out.Bytes())); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}
	for _, s := range []string{"trace 0af7651916cd43dd8448eb211c80319c", "10 spans", "86.5ms", ">36.33ms<"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("SVG lacks %q", s)
		}
	}
}

func TestRunSources(t *testing.T) {
	data, err := os.ReadFile(testTrace)
	if err != nil {
		t.Fatal(err)
	}
	const id = "0af7651916cd43dd8448eb211c80319c"
	jaeger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/traces/"+id {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"data":null,"errors":[{"code":404,"msg":"trace not found"}]}`)
			return
		}
		_, _ = w.Write(data)
	}))
	defer jaeger.Close()

	tests := []struct {
		name    string
		args    []string
		stdin   string
		wantErr string
	}{
		{name: "file", args: []string{testTrace}},
		{name: "stdin", args: []string{"-"}, stdin: string(data)},
		{name: "url", args: []string{jaeger.URL + "/api/traces/" + id}},
		{name: "trace id", args: []string{"-jaeger", jaeger.URL + "/", id}},
		{name: "unknown trace id", args: []string{"-jaeger", jaeger.URL, "0123456789abcdef0123456789abcdef"}, wantErr: "404"},
		{name: "jaeger error body", args: []string{"-"}, stdin: `{"data":null,"errors":[{"code":500,"msg":"boom"}]}`, wantErr: "boom"},
		{name: "empty trace", args: []string{"-"}, stdin: `{"data":[]}`, wantErr: "no trace"},
		{name: "not json", args: []string{"-"}, stdin: `<html>`, wantErr: "decode"},
		{name: "missing file", args: []string{"testdata/nope.json"}, wantErr: "nope.json"},
		{name: "no source", args: nil, wantErr: "want one SOURCE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(tt.args, strings.NewReader(tt.stdin), &out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("run = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if n := len(rows(t, out.Bytes())); n != 10 {
				t.Errorf("got %d rows, want 10", n)
			}
		})
	}
}

func TestRunWritesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.svg")
	var stdout bytes.Buffer
	if err := run([]string{"-o", path, "-title", "support <demo>", testTrace}, nil, &stdout); err != nil {
		t.Fatalf("run: %v", err)
	}
	if stdout.Len() != 0 {
		t.Errorf("wrote %d bytes to stdout with -o", stdout.Len())
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rows(t, svg)); n != 10 {
		t.Errorf("got %d rows, want 10", n)
	}
	if !strings.Contains(string(svg), "support &lt;demo&gt;") {
		t.Error("title is missing or not escaped")
	}
}

func TestBuildTraceOrphansAndLoops(t *testing.T) {
	ref := func(id string) []jaegerRef { return []jaegerRef{{RefType: "CHILD_OF", SpanID: id}} }
	jt := jaegerTrace{TraceID: "t", Spans: []jaegerSpan{
		{SpanID: "child", OperationName: "child", StartTime: 20, Duration: 5, References: ref("root")},
		{SpanID: "root", OperationName: "root", StartTime: 10, Duration: 30, References: ref("client-span")},
		{SpanID: "a", OperationName: "a", StartTime: 50, Duration: 1, References: ref("b")},
		{SpanID: "b", OperationName: "b", StartTime: 51, Duration: 1, References: ref("a")},
	}}
	tr := buildTrace(jt)
	var got []string
	for _, s := range tr.Spans {
		got = append(got, s.Operation+"@"+string(rune('0'+s.Depth)))
	}
	if diff := cmp.Diff([]string{"root@0", "child@1", "a@0", "b@0"}, got); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
	if tr.Start != 10 || tr.End != 52 {
		t.Errorf("trace spans %d..%d, want 10..52", tr.Start, tr.End)
	}
}

func TestFormatDuration(t *testing.T) {
	tests := map[int64]string{0: "0µs", 850: "850µs", 1000: "1ms", 12345: "12.35ms", 86500: "86.5ms", 1_250_000: "1.25s", 60_000_000: "60s"}
	for us, want := range tests {
		if got := formatDuration(us); got != want {
			t.Errorf("formatDuration(%d) = %q, want %q", us, got, want)
		}
	}
}
