package graphs

import (
	"bytes"
	"errors"
	"testing"
)

func TestDiagram(t *testing.T) {
	s, err := LoadFile("testdata/diagram.yaml", testBuiltin(), envOf(nil))
	if err != nil {
		t.Fatalf("LoadFile: %v", err)
	}
	tests := []struct{ graph, format, golden string }{
		{"support", "mermaid", "diagram.mermaid.golden"},
		{"support", "dot", "diagram.dot.golden"},
		{"odd", "mermaid", "odd.mermaid.golden"},
		{"odd", "dot", "odd.dot.golden"},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var out bytes.Buffer
			if err := Diagram(&out, s.Graphs[tt.graph], tt.format); err != nil {
				t.Fatalf("Diagram: %v", err)
			}
			checkGolden(t, tt.golden, out.String())
		})
	}
}

func TestDiagramUnknownFormat(t *testing.T) {
	s := mustParse(t, "agents: {a: {model: demo/echo}}\ngraphs: {g: {lead: a}}", nil)
	var out bytes.Buffer
	err := Diagram(&out, s.Graphs["g"], "svg")
	if !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("Diagram(svg) = %v; want ErrUnknownFormat", err)
	}
	if out.Len() != 0 {
		t.Errorf("Diagram(svg) wrote %q", out.String())
	}
}

func TestDescribeSeveralGraphs(t *testing.T) {
	s, err := LoadFile("testdata/diagram.yaml", testBuiltin(), envOf(nil))
	if err != nil {
		t.Fatalf("LoadFile: %v", err)
	}
	var out bytes.Buffer
	Describe(&out, s)
	checkGolden(t, "diagram.describe.golden", out.String())
}
