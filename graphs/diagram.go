package graphs

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrUnknownFormat is returned by Diagram for a format it cannot draw.
var ErrUnknownFormat = errors.New("unknown diagram format")

// Diagram writes a graph's agents and handoffs as "mermaid" (an unfenced
// `flowchart LR` block, ready to pipe or paste into Markdown) or "dot" (a
// Graphviz digraph). Each edge is labelled with the handoff's tool name; the
// lead is drawn bold, with a distinct shape and "(lead)" in its label; a
// handoff that enabled_when can disable is drawn dashed, and one that a
// permission rule gates has "(ask)" or "(deny)" after its tool name (with
// the rule's condition, if any: "(ask when metadata.plan=pro)"). A sub-agent is
// drawn with a thick arrow (mermaid ==>, dot bold with a circle at the
// caller's end), so that it cannot be mistaken for a handoff.
func Diagram(w io.Writer, g *Graph, format string) error {
	var b strings.Builder
	switch format {
	case "mermaid":
		writeMermaid(&b, g)
	case "dot":
		writeDot(&b, g)
	default:
		return fmt.Errorf("%w %q (want mermaid or dot)", ErrUnknownFormat, format)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write diagram: %w", err)
	}
	return nil
}

// writeMermaid draws g as a Mermaid flowchart.
func writeMermaid(b *strings.Builder, g *Graph) {
	agents := agentsInOrder(g)
	// Agent names may hold spaces or punctuation that Mermaid would
	// parse, so nodes get generated ids and the name goes in the label.
	ids := make(map[*Agent]string, len(agents))
	b.WriteString("flowchart LR\n")
	fmt.Fprintf(b, "    %%%% graph %s\n", oneLine(g.Name))
	for i, a := range agents {
		ids[a] = fmt.Sprintf("a%d", i)
		if a == g.Lead {
			fmt.Fprintf(b, "    %s([\"%s (lead)\"]):::lead\n", ids[a], mermaidText(a.Name))
		} else {
			fmt.Fprintf(b, "    %s[\"%s\"]\n", ids[a], mermaidText(a.Name))
		}
	}
	for _, a := range agents {
		for _, h := range a.Handoffs {
			arrow := "-->"
			if h.EnabledWhen != nil {
				arrow = "-.->"
			}
			if note := gateNote(g, a, h); note != "" {
				// A condition may hold any character: quoted, escaped.
				fmt.Fprintf(b, "    %s %s|\"%s (%s)\"| %s\n", ids[a], arrow, h.ToolName, mermaidText(note), ids[h.Target])
				continue
			}
			// Tool names are [a-zA-Z0-9_-]: safe in a label unquoted.
			fmt.Fprintf(b, "    %s %s|%s| %s\n", ids[a], arrow, h.ToolName, ids[h.Target])
		}
		for _, t := range a.Subagents {
			// A thick arrow: the caller asks and gets an answer back.
			fmt.Fprintf(b, "    %s ==>|%s| %s\n", ids[a], t.Name, ids[t.Agent.Agent])
		}
	}
	b.WriteString("    classDef lead stroke-width:3px,font-weight:bold\n")
}

// mermaidText escapes a quoted Mermaid label with its entity codes.
func mermaidText(s string) string {
	return strings.NewReplacer(
		"#", "#35;",
		`"`, "#quot;",
		"<", "#lt;",
		">", "#gt;",
	).Replace(s)
}

// writeDot draws g as a Graphviz digraph.
func writeDot(b *strings.Builder, g *Graph) {
	agents := agentsInOrder(g)
	fmt.Fprintf(b, "digraph %s {\n", dotQuote(g.Name))
	b.WriteString("    rankdir=LR;\n")
	b.WriteString("    node [shape=box, style=rounded];\n")
	for _, a := range agents {
		if a == g.Lead {
			fmt.Fprintf(b, "    %s [label=%s, shape=box, style=\"rounded,bold\", penwidth=2];\n",
				dotQuote(a.Name), dotQuote(a.Name+" (lead)"))
		} else {
			fmt.Fprintf(b, "    %s;\n", dotQuote(a.Name))
		}
	}
	for _, a := range agents {
		for _, h := range a.Handoffs {
			style := ""
			if h.EnabledWhen != nil {
				style = ", style=dashed"
			}
			label := h.ToolName
			if note := gateNote(g, a, h); note != "" {
				label += " (" + note + ")"
			}
			fmt.Fprintf(b, "    %s -> %s [label=%s%s];\n", dotQuote(a.Name), dotQuote(h.Target.Name), dotQuote(label), style)
		}
		for _, t := range a.Subagents {
			// Both ends: the caller asks and gets an answer back.
			fmt.Fprintf(b, "    %s -> %s [label=%s, dir=both, arrowtail=odot, style=bold];\n", dotQuote(a.Name), dotQuote(t.Agent.Agent.Name), dotQuote(t.Name))
		}
	}
	b.WriteString("}\n")
}

// dotQuote makes s a quoted DOT id. Backslashes are doubled because DOT
// reads \n, \l and the like in labels as escapes.
func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
