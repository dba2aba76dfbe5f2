package diagram

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboard-ai/switchboard/graphs"
)

// Colours of the edge kinds.
const (
	colHandoff  = "#37474f"
	colAsk      = "#b26b00"
	colDeny     = "#c62828"
	colSubagent = "#1565c0"
	bulge       = 70 // how far an edge between boxes of one column swings out
	legendH     = 4*lineHeight + 2*padding
)

// SVG writes g as a standalone SVG document: role="img", its <title> the
// graph's name, agents as boxes (the lead with a thick border and "(lead)"),
// handoffs and sub-agents as labelled arrows. Every id in it carries a
// prefix derived from the graph's name, so several diagrams can be inlined
// in one page. The same graph always gives the same bytes.
func SVG(w io.Writer, g *graphs.Graph) error {
	var b bytes.Buffer
	d := drawing{b: &b, g: g, id: idPrefix(g.Name)}
	d.draw()
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write diagram: %w", err)
	}
	return nil
}

// drawing is one SVG being written.
type drawing struct {
	b       *bytes.Buffer
	g       *graphs.Graph
	id      string
	boxes   []*box
	byAgent map[*graphs.Agent]*box
}

// idPrefix names the ids of one graph's diagram: "sb" and a short hash of
// the name (names may hold anything an id may not).
func idPrefix(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "sb" + hex.EncodeToString(sum[:4])
}

// edge is one arrow: a handoff or a sub-agent call.
type edge struct {
	from, to    *box
	tool        string
	subagent    bool
	gate        graphs.Action
	conditional string // enabled_when, as text; "" when always enabled
	// y1 and y2 are where the edge leaves its box and enters its target
	// (see ports).
	y1, y2 float64
}

func (d *drawing) draw() {
	d.boxes, d.byAgent = layout(d.g)
	edges := d.edges()
	width, height := 0.0, 0.0
	for _, b := range d.boxes {
		width = max(width, b.x+b.w)
		height = max(height, b.y+b.h)
	}
	width += bulge + margin
	for _, e := range edges {
		if e.from.col == e.to.col {
			width = max(width, e.from.x+e.from.w+bulge+margin+float64(len([]rune(e.label())))*charWidth)
		}
	}
	legendY := height + rowGap
	height = legendY + legendH + margin
	width = max(width, 520)

	fmt.Fprintf(d.b, `<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-labelledby="%s-title %s-desc" width="%s" height="%s" viewBox="0 0 %s %s" font-family="ui-monospace, SFMono-Regular, Menlo, Consolas, monospace" font-size="12">`+"\n",
		d.id, d.id, num(width), num(height), num(width), num(height))
	fmt.Fprintf(d.b, `<title id="%s-title">%s</title>`+"\n", d.id, esc(d.g.Name))
	fmt.Fprintf(d.b, `<desc id="%s-desc">%s</desc>`+"\n", d.id, esc(d.describe()))
	d.defs()
	for _, e := range edges {
		d.edge(e)
	}
	// Labels go over every line, so that no later line strikes one through.
	for _, e := range edges {
		d.edgeLabel(e)
	}
	for _, b := range d.boxes {
		d.box(b)
	}
	d.legend(legendY)
	d.b.WriteString("</svg>\n")
}

// describe says in words what the picture shows, for screen readers.
func (d *drawing) describe() string {
	var s strings.Builder
	fmt.Fprintf(&s, "Graph %s", d.g.Name)
	if d.g.Description != "" {
		fmt.Fprintf(&s, " (%s)", strings.Join(strings.Fields(d.g.Description), " "))
	}
	fmt.Fprintf(&s, ": lead %s, %d agent(s).", d.g.Lead.Name, len(d.boxes))
	return s.String()
}

// edges lists every handoff and sub-agent of the placed agents, in box
// order, then config order.
func (d *drawing) edges() []edge {
	var out []edge
	add := func(e edge) { out = append(out, e) }
	for _, b := range d.boxes {
		a := b.agent
		for _, h := range a.Handoffs {
			add(edge{from: b, to: d.byAgent[h.Target], tool: h.ToolName, gate: gate(d.g, a, h.ToolName), conditional: condition(h.EnabledWhen)})
		}
		for _, t := range a.Subagents {
			add(edge{from: b, to: d.byAgent[t.Agent.Agent], tool: t.Name, subagent: true, gate: gate(d.g, a, t.Name)})
		}
	}
	ports(out)
	return out
}

// end is one end of an edge on a side of a box.
type end struct {
	e     *edge
	start bool    // the edge leaves here
	other float64 // the other box's middle, to order ends without crossings
}

// ports spreads the ends of the edges on each side of each box evenly
// along it, ordered by where the other end is, so that edges do not all
// leave from one point and their labels do not pile up.
func ports(edges []edge) {
	onSide := make(map[boxSide][]end)
	var order []boxSide
	at := func(s boxSide, x end) {
		if _, ok := onSide[s]; !ok {
			order = append(order, s)
		}
		onSide[s] = append(onSide[s], x)
	}
	for i := range edges {
		e := &edges[i]
		fromRight, toRight := sides(e.from, e.to)
		at(boxSide{e.from, fromRight}, end{e: e, start: true, other: e.to.y + e.to.h/2})
		at(boxSide{e.to, toRight}, end{e: e, start: false, other: e.from.y + e.from.h/2})
	}
	for _, s := range order {
		ends := onSide[s]
		slices.SortStableFunc(ends, func(a, b end) int { return cmpFloat(a.other, b.other) })
		for i, x := range ends {
			y := s.b.y + s.b.h*float64(i+1)/float64(len(ends)+1)
			if x.start {
				x.e.y1 = y
			} else {
				x.e.y2 = y
			}
		}
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// condition writes an enabled_when as "plan=pro, principal=acme".
func condition(c *graphs.Condition) string {
	if c == nil {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(c.Metadata)) {
		parts = append(parts, k+"="+c.Metadata[k])
	}
	if c.Principal != "" {
		parts = append(parts, "principal="+c.Principal)
	}
	return strings.Join(parts, ", ")
}

// defs writes the arrowheads, one per colour.
func (d *drawing) defs() {
	d.b.WriteString("<defs>\n")
	for _, m := range []struct{ name, colour string }{
		{"handoff", colHandoff}, {"ask", colAsk}, {"deny", colDeny}, {"subagent", colSubagent},
	} {
		fmt.Fprintf(d.b, `<marker id="%s-%s" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="10" markerHeight="10" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="%s"/></marker>`+"\n",
			d.id, m.name, m.colour)
	}
	d.b.WriteString("</defs>\n")
}

// colour and marker name of an edge.
func (e edge) style() (colour, marker string) {
	switch {
	case e.gate == graphs.ActionDeny:
		return colDeny, "deny"
	case e.gate == graphs.ActionAsk:
		return colAsk, "ask"
	case e.subagent:
		return colSubagent, "subagent"
	}
	return colHandoff, "handoff"
}

// edge writes one arrow; its label comes later (edgeLabel).
func (d *drawing) edge(e edge) {
	p := e.path()
	colour, marker := e.style()
	kind := "handoff"
	if e.subagent {
		kind = "subagent"
	}
	fmt.Fprintf(d.b, `<g class="%s" data-from="%s" data-to="%s" data-tool="%s"`, kind, esc(e.from.agent.Name), esc(e.to.agent.Name), esc(e.tool))
	if e.gate != "" {
		fmt.Fprintf(d.b, ` data-gate="%s"`, e.gate)
	}
	if e.conditional != "" {
		fmt.Fprintf(d.b, ` data-when="%s"`, esc(e.conditional))
	}
	d.b.WriteString(">\n")
	fmt.Fprintf(d.b, `<title>%s</title>`+"\n", esc(e.describe()))
	attrs := ""
	switch {
	case e.gate != "":
		attrs = ` stroke-dasharray="7 4"`
	case e.conditional != "":
		attrs = ` stroke-dasharray="2 3"`
	}
	width := "1.5"
	if e.subagent {
		width = "2.5"
		attrs += fmt.Sprintf(` marker-start="url(#%s-%s)"`, d.id, marker)
	}
	fmt.Fprintf(d.b, `<path d="M%s,%s C%s,%s %s,%s %s,%s" fill="none" stroke="%s" stroke-width="%s"%s marker-end="url(#%s-%s)"/>`+"\n",
		num(p[0][0]), num(p[0][1]), num(p[1][0]), num(p[1][1]), num(p[2][0]), num(p[2][1]), num(p[3][0]), num(p[3][1]),
		colour, width, attrs, d.id, marker)
	d.b.WriteString("</g>\n")
}

// edgeLabel writes an edge's label, with the edge's data attributes, in a
// group of its own drawn after every line.
func (d *drawing) edgeLabel(e edge) {
	p := e.path()
	colour, _ := e.style()
	fmt.Fprintf(d.b, `<g class="label" data-from="%s" data-to="%s" data-tool="%s">`+"\n", esc(e.from.agent.Name), esc(e.to.agent.Name), esc(e.tool))
	// The label sits at the curve's midpoint, on a halo so that lines
	// under it do not strike it through.
	mx := (p[0][0] + 3*p[1][0] + 3*p[2][0] + p[3][0]) / 8
	my := (p[0][1] + 3*p[1][1] + 3*p[2][1] + p[3][1]) / 8
	lines := []string{e.label()}
	if e.conditional != "" {
		lines = append(lines, clip("when "+e.conditional))
	}
	anchor := "middle"
	if e.from.col == e.to.col {
		// Beside the swing, out of the boxes' way.
		anchor, mx = "start", mx+4
	}
	for i, l := range lines {
		y := my + 4 + float64(i)*lineHeight - float64(len(lines)-1)*lineHeight/2
		// A card under the text: a halo alone leaves the line showing
		// between the letters.
		w := float64(len([]rune(l)))*charWidth + 4
		x := mx - 2
		if anchor == "middle" {
			x = mx - w/2
		}
		fmt.Fprintf(d.b, `<rect x="%s" y="%s" width="%s" height="%s" fill="#fff" fill-opacity="0.9" rx="2"/>`+"\n",
			num(x), num(y-11), num(w), num(lineHeight))
		fmt.Fprintf(d.b, `<text x="%s" y="%s" text-anchor="%s" fill="%s" stroke="#fff" stroke-width="4" paint-order="stroke">%s</text>`+"\n",
			num(mx), num(y), anchor, colour, esc(l))
	}
	d.b.WriteString("</g>\n")
}

// label is the edge's first label line: its tool and gate.
func (e edge) label() string {
	if e.gate != "" {
		return clip(e.tool + " [" + string(e.gate) + "]")
	}
	return clip(e.tool)
}

// describe says what an edge is, for its tooltip.
func (e edge) describe() string {
	var s strings.Builder
	if e.subagent {
		fmt.Fprintf(&s, "%s asks sub-agent %s with %s", e.from.agent.Name, e.to.agent.Name, e.tool)
	} else {
		fmt.Fprintf(&s, "%s hands off to %s with %s", e.from.agent.Name, e.to.agent.Name, e.tool)
	}
	if e.gate != "" {
		fmt.Fprintf(&s, "; a permission rule may %s it", e.gate)
	}
	if e.conditional != "" {
		fmt.Fprintf(&s, "; only when %s", e.conditional)
	}
	return s.String()
}

// path returns the cubic Bézier of an edge, between its ports: forward
// edges run from the right side of one box to the left side of a later
// column's; backward edges from the left side to the target's right side;
// edges within a column (and to the box itself) swing out to the right.
func (e edge) path() [4][2]float64 {
	f, t := e.from, e.to
	switch {
	case t.col > f.col:
		x1, x2 := f.x+f.w, t.x
		dx := (x2 - x1) / 2
		return [4][2]float64{{x1, e.y1}, {x1 + dx, e.y1}, {x2 - dx, e.y2}, {x2, e.y2}}
	case t.col < f.col:
		x1, x2 := f.x, t.x+t.w
		dx := (x1 - x2) / 2
		return [4][2]float64{{x1, e.y1}, {x1 - dx, e.y1}, {x2 + dx, e.y2}, {x2, e.y2}}
	default:
		x1, x2 := f.x+f.w, t.x+t.w
		out := max(x1, x2) + bulge
		return [4][2]float64{{x1, e.y1}, {out, e.y1}, {out, e.y2}, {x2, e.y2}}
	}
}

// box writes one agent's box: its name, "(lead)" for the lead, and one
// line per tool.
func (d *drawing) box(b *box) {
	lead := b.agent == d.g.Lead
	fmt.Fprintf(d.b, `<g class="agent" data-agent="%s"`, esc(b.agent.Name))
	if lead {
		d.b.WriteString(` data-lead="true"`)
	}
	d.b.WriteString(">\n")
	title := b.agent.Name
	if b.agent.Description != "" {
		title += ": " + strings.Join(strings.Fields(b.agent.Description), " ")
	}
	fmt.Fprintf(d.b, `<title>%s</title>`+"\n", esc(title))
	stroke, fill := "1.5", "#fafafa"
	if lead {
		stroke, fill = "3.5", "#e8f0fe"
	}
	fmt.Fprintf(d.b, `<rect x="%s" y="%s" width="%s" height="%s" rx="8" fill="%s" stroke="#263238" stroke-width="%s"/>`+"\n",
		num(b.x), num(b.y), num(b.w), num(b.h), fill, stroke)
	name := clip(b.agent.Name)
	fmt.Fprintf(d.b, `<text x="%s" y="%s" font-weight="bold" font-size="13">%s`, num(b.x+padding), num(b.y+18), esc(name))
	if lead {
		d.b.WriteString(` <tspan class="lead" font-weight="normal" fill="#1a56db">(lead)</tspan>`)
	}
	d.b.WriteString("</text>\n")
	for i, l := range b.lines {
		colour := "#455a64"
		switch l.gate {
		case graphs.ActionAsk:
			colour = colAsk
		case graphs.ActionDeny:
			colour = colDeny
		}
		fmt.Fprintf(d.b, `<text class="tool" x="%s" y="%s" fill="%s">%s</text>`+"\n",
			num(b.x+padding), num(b.y+headHeight+float64(i)*lineHeight+10), colour, esc(l.label()))
	}
	d.b.WriteString("</g>\n")
}

// legend explains the edge styles.
func (d *drawing) legend(y float64) {
	fmt.Fprintf(d.b, `<g class="legend" transform="translate(%d,%s)">`+"\n", margin, num(y))
	for i, l := range []struct{ text, colour, marker, dash string }{
		{"handoff (label: its tool)", colHandoff, "handoff", ""},
		{"handoff only when enabled_when holds", colHandoff, "handoff", "2 3"},
		{"gated by a permission rule: [ask] or [deny]", colAsk, "ask", "7 4"},
		{"sub-agent (asked, answers back)", colSubagent, "subagent", ""},
	} {
		y := float64(i)*lineHeight + padding
		dash := ""
		if l.dash != "" {
			dash = ` stroke-dasharray="` + l.dash + `"`
		}
		fmt.Fprintf(d.b, `<path d="M0,%s L48,%s" stroke="%s" stroke-width="1.5"%s marker-end="url(#%s-%s)"/>`+"\n",
			num(y), num(y), l.colour, dash, d.id, l.marker)
		fmt.Fprintf(d.b, `<text x="60" y="%s" fill="#455a64">%s</text>`+"\n", num(y+4), esc(l.text))
	}
	d.b.WriteString("</g>\n")
}

// num writes a coordinate with at most one decimal.
func num(f float64) string { return strconv.FormatFloat(float64(int64(f*10+0.5))/10, 'f', -1, 64) }

// esc escapes text for XML character data and attribute values; characters
// XML cannot hold become U+FFFD.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
