package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
)

// Layout, in SVG user units (pixels).
const (
	headerHeight = 58
	rowHeight    = 34
	legendHeight = 34
	labelWidth   = 420 // the name column; the timeline takes the rest
	indentStep   = 14
	margin       = 12
	charWidth    = 6.6 // rough width of one 12px sans-serif character, for truncation
)

// Colours. Services get one of the palette's colours; handoffs are amber
// and errors red whatever their service, since those are what a reader of
// a Switchboard trace looks for.
const (
	colorError       = "#dc2626"
	colorHandoff     = "#f59e0b"
	colorHandoffRow  = "#fef3c7"
	colorStripe      = "#f6f7f9"
	colorText        = "#111827"
	colorMuted       = "#6b7280"
	colorGrid        = "#e5e7eb"
	fontFamily       = "ui-sans-serif, system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif"
	monoFontFamily   = "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace"
	handoffMarkGlyph = "\u21c4 " // ⇄
)

var palette = []string{"#3b82f6", "#10b981", "#8b5cf6", "#0ea5e9", "#14b8a6", "#6366f1", "#84cc16", "#ec4899"}

// keyAttributes are the tags shown under a span's name, in this order,
// with the short label they get.
var keyAttributes = []struct{ key, label string }{
	{"gen_ai.agent.name", "agent"},
	{"switchboard.handoff.outcome", "outcome"},
	{tokensKey, "tokens"},
	{"gen_ai.response.finish_reasons", "finish"},
	{"gen_ai.provider.name", "provider"},
	{"gen_ai.tool.name", "tool"},
	{"gen_ai.conversation.id", "session"},
	{"http.response.status_code", "status"},
	{"error.type", "error"},
}

// tokensKey stands for the input and output token counts, shown together.
const tokensKey = "tokens"

// render writes t as an SVG waterfall of the given total width.
func render(w io.Writer, t *Trace, width int, title string) error {
	width = max(width, labelWidth+300)
	timelineX := float64(labelWidth + margin)
	timelineW := float64(width-margin) - timelineX - 70 // room for the last duration label
	total := max(t.End-t.Start, 1)
	height := headerHeight + len(t.Spans)*rowHeight + legendHeight

	sw := &svgWriter{w: w}
	sw.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s" font-size="12">`+"\n",
		width, height, width, height, fontFamily)
	sw.printf(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")

	if title == "" {
		title = "trace " + t.ID
	}
	sw.printf(`<text x="%d" y="22" font-size="15" font-weight="600" fill="%s">%s</text>`+"\n", margin, colorText, esc(title))
	sw.printf(`<text x="%d" y="40" fill="%s">%s · %d spans · %s</text>`+"\n",
		margin, colorMuted, esc(servicesOf(t)), len(t.Spans), formatDuration(total))

	// Time axis: ticks at a round interval, grid lines down every row.
	step := tickStep(total)
	rowsBottom := headerHeight + len(t.Spans)*rowHeight
	for tick := int64(0); tick <= total; tick += step {
		x := timelineX + float64(tick)/float64(total)*timelineW
		sw.printf(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", x, headerHeight-6, x, rowsBottom, colorGrid)
		sw.printf(`<text x="%.1f" y="%d" fill="%s" font-size="10" text-anchor="middle">%s</text>`+"\n",
			x, headerHeight-9, colorMuted, formatDuration(tick))
	}

	colors := serviceColors(t)
	for i, s := range t.Spans {
		y := headerHeight + i*rowHeight
		class := "span"
		switch {
		case s.Handoff() && s.Error():
			class += " handoff error"
		case s.Handoff():
			class += " handoff"
		case s.Error():
			class += " error"
		}
		sw.printf(`<g class="%s" data-span-id="%s" data-depth="%d">`+"\n", class, esc(s.ID), s.Depth)
		sw.printf(`<title>%s</title>`+"\n", esc(tooltip(s)))
		switch {
		case s.Handoff():
			sw.printf(`<rect x="0" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", y, width, rowHeight, colorHandoffRow)
		case i%2 == 1:
			sw.printf(`<rect x="0" y="%d" width="%d" height="%d" fill="%s"/>`+"\n", y, width, rowHeight, colorStripe)
		}

		// Name column: "⇄ operation service", then the key attributes.
		x := margin + s.Depth*indentStep
		room := int(float64(labelWidth-x) / charWidth)
		name := s.Operation
		if s.Handoff() {
			name = handoffMarkGlyph + name
		}
		nameColor := colorText
		if s.Error() {
			nameColor = colorError
		}
		name = truncate(name, room)
		sw.printf(`<text x="%d" y="%d" fill="%s" font-weight="600">%s`, x, y+14, nameColor, esc(name))
		// One service is named in the header; several are named per row.
		if rest := room - len([]rune(name)) - 2; rest > 3 && len(colors) > 1 && s.Service != "" {
			sw.printf(`<tspan fill="%s" font-weight="400" dx="6">%s</tspan>`, colorMuted, esc(truncate(s.Service, rest)))
		}
		sw.printf("</text>\n")
		if attrs := keyAttrs(s); attrs != "" {
			sw.printf(`<text x="%d" y="%d" fill="%s" font-size="10.5" font-family="%s">%s</text>`+"\n",
				x, y+28, colorMuted, monoFontFamily, esc(truncate(attrs, int(float64(labelWidth-x)/(charWidth*0.95)))))
		}

		// Bar and its duration.
		bx := timelineX + float64(s.Start-t.Start)/float64(total)*timelineW
		bw := math.Max(2, float64(s.Duration)/float64(total)*timelineW)
		fill := colors[s.Service]
		switch {
		case s.Error():
			fill = colorError
		case s.Handoff():
			fill = colorHandoff
		}
		sw.printf(`<rect class="bar" x="%.1f" y="%d" width="%.1f" height="16" rx="3" fill="%s"/>`+"\n", bx, y+9, bw, fill)
		label := formatDuration(s.Duration)
		lx, anchor := bx+bw+4, "start"
		if lx+float64(len(label))*charWidth > float64(width-margin) {
			lx, anchor = bx-4, "end" // no room on the right: put it before the bar
		}
		sw.printf(`<text x="%.1f" y="%d" fill="%s" font-size="11" text-anchor="%s">%s</text>`+"\n", lx, y+21, colorMuted, anchor, label)
		sw.printf("</g>\n")
	}

	// Legend.
	ly := rowsBottom + 20
	lx := margin
	legend := func(color, text string) {
		sw.printf(`<rect x="%d" y="%d" width="12" height="12" rx="2" fill="%s"/><text x="%d" y="%d" fill="%s">%s</text>`+"\n",
			lx, ly-10, color, lx+16, ly, colorMuted, esc(text))
		lx += 16 + int(float64(len(text))*charWidth) + 18
	}
	for _, svc := range servicesList(t) {
		legend(colors[svc], svc)
	}
	legend(colorHandoff, "handoff")
	legend(colorError, "error")
	sw.printf("</svg>\n")
	return sw.err
}

// svgWriter keeps the first write error so that render checks once.
type svgWriter struct {
	w   io.Writer
	err error
}

func (s *svgWriter) printf(format string, args ...any) {
	if s.err == nil {
		_, s.err = fmt.Fprintf(s.w, format, args...)
	}
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // writing to a Builder cannot fail
	return b.String()
}

// truncate shortens s to at most n runes, marking the cut with an ellipsis.
func truncate(s string, n int) string {
	r := []rune(s)
	if n < 1 {
		return ""
	}
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// keyAttrs is the one-line summary of a span's notable tags.
func keyAttrs(s *Span) string {
	var parts []string
	for _, ka := range keyAttributes {
		v := s.Tags[ka.key]
		switch ka.key {
		case tokensKey:
			in, out := s.Tags["gen_ai.usage.input_tokens"], s.Tags["gen_ai.usage.output_tokens"]
			if in != "" || out != "" {
				v = orDash(in) + "/" + orDash(out)
			}
		case "gen_ai.response.finish_reasons":
			v = listText(v)
		}
		if v != "" {
			parts = append(parts, ka.label+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

// listText turns an array attribute, which Jaeger shows as JSON text
// (["stop"]), into a plain comma-separated list.
func listText(v string) string {
	var list []string
	if err := json.Unmarshal([]byte(v), &list); err != nil {
		return v
	}
	return strings.Join(list, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// tooltip lists every tag of the span, for a viewer's hover.
func tooltip(s *Span) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s) %s", s.Operation, s.Service, formatDuration(s.Duration))
	for _, k := range s.TagOrder {
		fmt.Fprintf(&b, "\n%s = %s", k, s.Tags[k])
	}
	return b.String()
}

// servicesList lists the trace's services in order of first appearance.
func servicesList(t *Trace) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range t.Spans {
		if s.Service != "" && !seen[s.Service] {
			seen[s.Service] = true
			out = append(out, s.Service)
		}
	}
	return out
}

func servicesOf(t *Trace) string {
	return strings.Join(servicesList(t), ", ")
}

func serviceColors(t *Trace) map[string]string {
	colors := map[string]string{}
	for i, svc := range servicesList(t) {
		colors[svc] = palette[i%len(palette)]
	}
	return colors
}

// tickStep picks a round interval (1, 2 or 5 times a power of ten, in µs)
// that puts at most about eight ticks on the axis.
func tickStep(total int64) int64 {
	step := int64(1)
	for {
		for _, m := range []int64{1, 2, 5} {
			if total/(step*m) <= 8 {
				return step * m
			}
		}
		step *= 10
	}
}

// formatDuration formats µs as the Jaeger UI does: 850µs, 12.3ms, 1.25s.
func formatDuration(us int64) string {
	switch {
	case us < 1000:
		return fmt.Sprintf("%dµs", us)
	case us < 1_000_000:
		return trimZeros(fmt.Sprintf("%.2f", float64(us)/1e3)) + "ms"
	default:
		return trimZeros(fmt.Sprintf("%.2f", float64(us)/1e6)) + "s"
	}
}

func trimZeros(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
