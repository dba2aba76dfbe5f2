package diagram

import (
	"strings"
	"unicode/utf8"

	"github.com/switchboard-ai/switchboard/graphs"
)

// Sizes, in SVG user units (pixels at 100%). Text is monospace so that a
// box can be sized from its longest line without measuring fonts.
const (
	charWidth  = 7.2 // of the 12px monospace text
	nameWidth  = 8.2 // of the 13px bold monospace name
	lineHeight = 16
	headHeight = 26 // the name line
	padding    = 10
	minWidth   = 170
	maxChars   = 48  // longer lines are cut with an ellipsis
	minColGap  = 150 // widened to fit the longest edge label
	rowGap     = 36
	margin     = 24
	portGap    = 20 // between two edges' ends on one side of a box
)

// box is one agent placed on the canvas.
type box struct {
	agent *graphs.Agent
	col   int
	x, y  float64
	w, h  float64
	lines []line // under the name
}

// line is one line of text in a box: a tool, and its gate if any.
type line struct {
	text string
	gate graphs.Action // "" when no rule gates it
}

// layout places g's agents: breadth first from the lead over handoffs
// and sub-agents, one column per distance, in discovery order within a
// column.
func layout(g *graphs.Graph) (boxes []*box, byAgent map[*graphs.Agent]*box) {
	byAgent = make(map[*graphs.Agent]*box)
	add := func(a *graphs.Agent, col int) {
		if _, ok := byAgent[a]; ok {
			return
		}
		b := &box{agent: a, col: col, lines: toolLines(g, a)}
		byAgent[a] = b
		boxes = append(boxes, b)
	}
	add(g.Lead, 0)
	for i := 0; i < len(boxes); i++ {
		b := boxes[i]
		for _, h := range b.agent.Handoffs {
			add(h.Target, b.col+1)
		}
		for _, t := range b.agent.Subagents {
			add(t.Agent.Agent, b.col+1)
		}
	}

	// Each side of a box must have room for the edges that end on it (see
	// ports), a portGap apart, so that their labels do not overlap.
	ends := make(map[boxSide]int)
	for _, b := range boxes {
		targets := make([]*graphs.Agent, 0, len(b.agent.Handoffs)+len(b.agent.Subagents))
		for _, h := range b.agent.Handoffs {
			targets = append(targets, h.Target)
		}
		for _, t := range b.agent.Subagents {
			targets = append(targets, t.Agent.Agent)
		}
		for _, a := range targets {
			t := byAgent[a]
			fromRight, toRight := sides(b, t)
			ends[boxSide{b, fromRight}]++
			ends[boxSide{t, toRight}]++
		}
	}

	// Size the boxes, then stack each column and set columns side by side.
	cols := 0
	for _, b := range boxes {
		// The name is bold and a size larger; " (lead)" is not.
		width := float64(utf8.RuneCountInString(clip(b.agent.Name)))*nameWidth + 7*charWidth
		for _, l := range b.lines {
			width = max(width, float64(utf8.RuneCountInString(l.label()))*charWidth)
		}
		b.w = max(minWidth, width+2*padding)
		b.h = headHeight + float64(len(b.lines))*lineHeight + padding
		b.h = max(b.h, float64(max(ends[boxSide{b, true}], ends[boxSide{b, false}])+1)*portGap)
		cols = max(cols, b.col+1)
	}
	// The gap between columns holds the edges' labels.
	colGap := float64(minColGap)
	for _, b := range boxes {
		for _, h := range b.agent.Handoffs {
			colGap = max(colGap, float64(utf8.RuneCountInString(clip(h.ToolName+" [allow]")))*charWidth+40)
			if h.EnabledWhen != nil {
				colGap = max(colGap, float64(utf8.RuneCountInString(clip("when "+condition(h.EnabledWhen))))*charWidth+40)
			}
		}
		for _, t := range b.agent.Subagents {
			colGap = max(colGap, float64(utf8.RuneCountInString(clip(t.Name+" [allow]")))*charWidth+40)
		}
	}
	x := float64(margin)
	for c := range cols {
		y, width := float64(margin), 0.0
		for _, b := range boxes {
			if b.col != c {
				continue
			}
			b.x, b.y = x, y
			y += b.h + rowGap
			width = max(width, b.w)
		}
		x += width + colGap
	}
	return boxes, byAgent
}

// toolLines lists what an agent can call besides handoffs and sub-agents:
// its server tools, its MCP servers' tools and the graph's memory tools.
func toolLines(g *graphs.Graph, a *graphs.Agent) []line {
	var out []line
	for _, t := range a.Tools {
		if t.Kind == graphs.ToolAgent {
			continue // drawn as an edge
		}
		out = append(out, line{text: "tool " + t.Name, gate: gate(g, a, t.Name)})
	}
	for _, s := range a.MCP {
		if len(s.Tools) == 0 {
			out = append(out, line{text: "mcp " + s.Name + ": every tool"})
			continue
		}
		for _, name := range s.Tools {
			out = append(out, line{text: "mcp " + s.Name + ": " + name, gate: gate(g, a, name)})
		}
	}
	for _, t := range g.MemoryTools {
		out = append(out, line{text: "memory " + t.Name, gate: gate(g, a, t.Name)})
	}
	return out
}

// label is the line as drawn: the tool, its gate, cut to maxChars.
func (l line) label() string {
	s := l.text
	if l.gate != "" {
		s += " [" + string(l.gate) + "]"
	}
	return clip(s)
}

// clip cuts s to maxChars runes, with an ellipsis, and folds it onto one
// line.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= maxChars {
		return s
	}
	r := []rune(s)
	return string(r[:maxChars-1]) + "…"
}

// gate is the strictest action a permission rule can take on a call of
// tool by agent a in g: graph rules first, then the agent's, the first
// unconditional match ending the search (as runtime's decideRules reads
// them for a given request). A rule with `when` may apply, so its ask or
// deny counts too. "" when no rule can ask or deny.
func gate(g *graphs.Graph, a *graphs.Agent, tool string) graphs.Action {
	if r := g.Gate(a, tool); r != nil && r.Action != graphs.ActionAllow {
		return r.Action
	}
	return ""
}

// boxSide is the left or right side of a box.
type boxSide struct {
	b     *box
	right bool
}

// sides says on which side of its boxes an edge from f to t ends: forward
// edges leave on the right and enter on the left, backward edges the
// other way round, and edges within a column use the right side at both
// ends.
func sides(f, t *box) (fromRight, toRight bool) {
	switch {
	case t.col > f.col:
		return true, false
	case t.col < f.col:
		return false, true
	}
	return true, true
}
