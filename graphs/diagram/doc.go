// Package diagram draws a compiled graph as a standalone SVG image, the
// picture the console shows (GET /v1/graphs/{model}/diagram.svg).
//
// It reads only the graphs package: agents are boxes laid out in columns
// by their distance from the lead (breadth first over handoffs and
// sub-agents, in config order, so the same graph always draws the same
// bytes); each box lists the agent's tools. Handoffs are arrows labelled
// with their tool name, dashed when a permission rule can gate them (ask
// or deny), dotted when enabled_when can disable them; sub-agents are
// double-headed blue arrows. The textual formats (mermaid, dot) live in
// graphs itself (graphs.Diagram).
package diagram
