package diagram_test

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-ai/switchboard/graphs"
	"github.com/switchboard-ai/switchboard/graphs/diagram"
)

func load(t *testing.T) *graphs.Set {
	t.Helper()
	s, err := graphs.LoadFile("testdata/desk.yaml", map[string]graphs.Provider{"demo": {Kind: "demo"}}, func(string) string { return "" })
	if err != nil {
		t.Fatalf("LoadFile: %v", err)
	}
	return s
}

// svgDoc is what the tests read of a diagram, through encoding/xml.
type svgDoc struct {
	XMLName xml.Name `xml:"http://www.w3.org/2000/svg svg"`
	Role    string   `xml:"role,attr"`
	ViewBox string   `xml:"viewBox,attr"`
	Title   string   `xml:"title"`
	Desc    string   `xml:"desc"`
	Groups  []group  `xml:"g"`
}

type group struct {
	Class string `xml:"class,attr"`
	Agent string `xml:"data-agent,attr"`
	Lead  string `xml:"data-lead,attr"`
	From  string `xml:"data-from,attr"`
	To    string `xml:"data-to,attr"`
	Tool  string `xml:"data-tool,attr"`
	Gate  string `xml:"data-gate,attr"`
	When  string `xml:"data-when,attr"`
	Title string `xml:"title"`
	Rect  *struct {
		X           float64 `xml:"x,attr"`
		Y           float64 `xml:"y,attr"`
		Width       float64 `xml:"width,attr"`
		Height      float64 `xml:"height,attr"`
		StrokeWidth string  `xml:"stroke-width,attr"`
	} `xml:"rect"`
	Path *struct {
		Dash string `xml:"stroke-dasharray,attr"`
	} `xml:"path"`
	Texts []struct {
		Class  string  `xml:"class,attr"`
		X      float64 `xml:"x,attr"`
		Y      float64 `xml:"y,attr"`
		Anchor string  `xml:"text-anchor,attr"`
		Text   string  `xml:",chardata"`
		Span   string  `xml:"tspan"`
	} `xml:"text"`
}

// render draws a graph and checks that the bytes are well-formed XML
// (every token decodes) before decoding them.
func render(t *testing.T, g *graphs.Graph) ([]byte, svgDoc) {
	t.Helper()
	var out bytes.Buffer
	if err := diagram.SVG(&out, g); err != nil {
		t.Fatalf("SVG: %v", err)
	}
	dec := xml.NewDecoder(bytes.NewReader(out.Bytes()))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("the diagram of %q is not well-formed XML: %v\n%s", g.Name, err, out.Bytes())
		}
	}
	var doc svgDoc
	if err := xml.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return out.Bytes(), doc
}

// edgeOf is an edge as the tests compare it.
type edgeOf struct{ Class, From, To, Tool, Gate, When, Dash string }

func TestSVGDrawsTheGraph(t *testing.T) {
	g := load(t).Graphs["support"]
	_, doc := render(t, g)
	if doc.Role != "img" || doc.Title != "support" || !strings.Contains(doc.Desc, `Customer <support> & "desk"`) {
		t.Errorf("svg role %q, title %q, desc %q", doc.Role, doc.Title, doc.Desc)
	}

	agents := map[string]group{}
	var edges []edgeOf
	for _, gr := range doc.Groups {
		switch gr.Class {
		case "agent":
			agents[gr.Agent] = gr
		case "handoff", "subagent":
			e := edgeOf{gr.Class, gr.From, gr.To, gr.Tool, gr.Gate, gr.When, ""}
			if gr.Path != nil {
				e.Dash = gr.Path.Dash
			}
			edges = append(edges, e)
		}
	}
	if len(agents) != 5 {
		t.Errorf("agents drawn: %v, want the 5 of the graph", keys(agents))
	}
	for name, a := range agents {
		isLead := name == "triage"
		if (a.Lead == "true") != isLead || (a.Texts[0].Span == "(lead)") != isLead {
			t.Errorf("agent %s: data-lead %q, name line %+v; lead only for triage", name, a.Lead, a.Texts[0])
		}
		if a.Rect == nil || (a.Rect.StrokeWidth == "3.5") != isLead {
			t.Errorf("agent %s: rect %+v; the lead alone has the thick border", name, a.Rect)
		}
	}
	wantEdges := []edgeOf{
		{"handoff", "triage", "billing", "transfer_to_billing", "", "", ""},
		{"handoff", "triage", "refunds", "escalate_refund", "ask", "", "7 4"},
		{"handoff", "triage", "premium", "transfer_to_premium", "", "plan=pro", "2 3"},
		{"subagent", "triage", "researcher", "ask_researcher", "", "", ""},
		{"handoff", "billing", "triage", "transfer_to_triage", "", "", ""},
		{"handoff", "premium", "refunds", "premium_refund", "deny", "", "7 4"},
	}
	if diff := cmp.Diff(wantEdges, edges); diff != "" {
		t.Errorf("edges mismatch (-want +got):\n%s", diff)
	}

	wantTools := map[string][]string{
		"triage":     {"mcp crm: lookup_customer", "memory remember_profile", "memory recall_profile"},
		"billing":    {"tool lookup_charges", "memory remember_profile", "memory recall_profile"},
		"refunds":    {"tool issue_refund [ask]", "tool delete_order [deny]", "mcp docs: every tool", "memory remember_profile", "memory recall_profile"},
		"premium":    {"memory remember_profile", "memory recall_profile"},
		"researcher": {"memory remember_profile", "memory recall_profile"},
	}
	for name, want := range wantTools {
		var got []string
		for _, tx := range agents[name].Texts {
			if tx.Class == "tool" {
				got = append(got, tx.Text)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("tools of %s mismatch (-want +got):\n%s", name, diff)
		}
	}

	// Boxes never overlap, and the lead is in the first column.
	var rects []group
	for _, a := range agents {
		rects = append(rects, a)
	}
	for i, a := range rects {
		for _, b := range rects[i+1:] {
			ra, rb := a.Rect, b.Rect
			if ra.X < rb.X+rb.Width && rb.X < ra.X+ra.Width && ra.Y < rb.Y+rb.Height && rb.Y < ra.Y+ra.Height {
				t.Errorf("boxes of %s and %s overlap", a.Agent, b.Agent)
			}
		}
		if a.Agent != "triage" && a.Rect.X <= agents["triage"].Rect.X {
			t.Errorf("%s is not right of the lead", a.Agent)
		}
	}
}

// Names with markup survive as text: escaped in the bytes, themselves
// once decoded.
func TestSVGEscapes(t *testing.T) {
	g := load(t).Graphs["odd"]
	raw, doc := render(t, g)
	name := `Desk "A" & <b>`
	if doc.Title != "odd" {
		t.Errorf("title %q", doc.Title)
	}
	found := false
	for _, gr := range doc.Groups {
		if gr.Class == "agent" && gr.Agent == name {
			found = true
			if !strings.HasPrefix(gr.Texts[0].Text, name) || gr.Title != name+": Odd <name>" {
				t.Errorf("odd agent drawn as %+v", gr)
			}
		}
	}
	if !found {
		t.Errorf("no box for %q", name)
	}
	if bytes.Contains(raw, []byte("<b>")) || bytes.Contains(raw, []byte("<name>")) {
		t.Errorf("markup from a name reached the SVG unescaped")
	}
}

// The same graph always draws the same bytes, and two graphs' ids differ so
// that one page can inline both.
func TestSVGIsDeterministic(t *testing.T) {
	s := load(t)
	a, _ := render(t, s.Graphs["support"])
	for range 5 {
		if b, _ := render(t, s.Graphs["support"]); !bytes.Equal(a, b) {
			t.Fatal("two renders of one graph differ")
		}
	}
	odd, _ := render(t, s.Graphs["odd"])
	idOf := func(b []byte) string {
		_, rest, _ := strings.Cut(string(b), `<marker id="`)
		id, _, _ := strings.Cut(rest, `"`)
		return id
	}
	if idOf(a) == "" || idOf(a) == idOf(odd) {
		t.Errorf("marker ids %q and %q: want distinct per graph", idOf(a), idOf(odd))
	}
}

func keys(m map[string]group) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Edge labels never overlap one another, nor a box, even between short
// boxes with edges both ways.
func TestSVGLabelsDoNotOverlap(t *testing.T) {
	type rect struct {
		what       string
		x, y, w, h float64
	}
	overlap := func(a, b rect) bool {
		return a.x < b.x+b.w && b.x < a.x+a.w && a.y < b.y+b.h && b.y < a.y+a.h
	}
	s := load(t)
	for _, name := range []string{"ring", "support", "odd"} {
		_, doc := render(t, s.Graphs[name])
		var labels, boxes []rect
		for _, gr := range doc.Groups {
			switch gr.Class {
			case "agent":
				boxes = append(boxes, rect{"box " + gr.Agent, gr.Rect.X, gr.Rect.Y, gr.Rect.Width, gr.Rect.Height})
			case "label":
				for _, tx := range gr.Texts {
					w := float64(len([]rune(tx.Text))) * 7.2
					x := tx.X
					if tx.Anchor == "middle" {
						x -= w / 2
					}
					labels = append(labels, rect{"label " + tx.Text, x, tx.Y - 11, w, 13})
				}
			}
		}
		if len(labels) == 0 || len(boxes) == 0 {
			t.Fatalf("graph %s: %d labels and %d boxes found; the test reads the wrong groups", name, len(labels), len(boxes))
		}
		for i, a := range labels {
			for _, b := range append(labels[i+1:], boxes...) {
				if overlap(a, b) {
					t.Errorf("graph %s: %s overlaps %s", name, a.what, b.what)
				}
			}
		}
	}
}
