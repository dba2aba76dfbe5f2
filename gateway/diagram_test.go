package gateway_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// diagramYAML has a graph with a handoff and a sub-agent, and one whose
// name needs escaping in a URL and in XML.
const diagramYAML = `
server:
  api_keys: [{name: acme, key: key-acme}]
tools:
  lookup_charges: {description: Lists charges, http: {url: "http://127.0.0.1:9/charges"}}
agents:
  triage:
    description: Routes the user
    model: demo/echo
    handoffs: [billing]
    subagents: [researcher]
  billing:
    description: Billing questions
    model: demo/echo
    tools: [lookup_charges]
  researcher:
    description: Looks things up
    model: demo/echo
graphs:
  support: {lead: triage}
  "desk/<b>&": {lead: billing}
`

// svgOf checks that body is well-formed XML whose root is an <svg> with
// role img, and returns its title and the agents it draws.
func svgOf(t *testing.T, body []byte) (title string, agents []string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(body))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, body)
		}
	}
	var doc struct {
		XMLName xml.Name `xml:"http://www.w3.org/2000/svg svg"`
		Role    string   `xml:"role,attr"`
		Title   string   `xml:"title"`
		Groups  []struct {
			Class string `xml:"class,attr"`
			Agent string `xml:"data-agent,attr"`
		} `xml:"g"`
	}
	if err := xml.Unmarshal(body, &doc); err != nil {
		t.Fatalf("decode svg: %v", err)
	}
	if doc.Role != "img" {
		t.Errorf("svg role %q, want img", doc.Role)
	}
	for _, g := range doc.Groups {
		if g.Class == "agent" {
			agents = append(agents, g.Agent)
		}
	}
	slices.Sort(agents)
	return doc.Title, agents
}

func TestGraphDiagram(t *testing.T) {
	gw := gwtest.Start(t, diagramYAML, nil)
	key := bearer("key-acme")
	get := func(path string, header map[string]string) *gwtest.Response {
		return gw.Do(context.Background(), http.MethodGet, path, nil, header)
	}

	r := get("/v1/graphs/support/diagram.svg", key)
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "image/svg+xml" {
		t.Fatalf("GET diagram: %d %q %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	if title, agents := svgOf(t, r.Body); title != "support" || !slices.Equal(agents, []string{"billing", "researcher", "triage"}) {
		t.Errorf("support diagram: title %q, agents %v", title, agents)
	}

	// A name with a slash and markup: escaped in the URL as the console
	// does (encodeURIComponent), and in the XML.
	odd := "desk/<b>&"
	r = get("/v1/graphs/"+url.PathEscape(odd)+"/diagram.svg", key)
	if r.Status != http.StatusOK {
		t.Fatalf("GET diagram of %q: %d %s", odd, r.Status, r.Body)
	}
	if title, agents := svgOf(t, r.Body); title != odd || !slices.Equal(agents, []string{"billing"}) {
		t.Errorf("odd diagram: title %q, agents %v", title, agents)
	}

	for _, tc := range []struct {
		path   string
		header map[string]string
		status int
		code   string
	}{
		{"/v1/graphs/nope/diagram.svg", key, http.StatusNotFound, "model_not_found"},
		{"/v1/graphs/support/diagram.svg", nil, http.StatusUnauthorized, "invalid_api_key"},
		{"/v1/graphs/support/diagram.svg", bearer("wrong"), http.StatusUnauthorized, "invalid_api_key"},
		{"/v1/graphs/support/other.svg", key, http.StatusNotFound, "not_found"},
		{"/v1/graphs/support", key, http.StatusNotFound, "not_found"},
		{"/v1/graphs//diagram.svg", key, http.StatusNotFound, "not_found"},
	} {
		r := get(tc.path, tc.header)
		if r.Status != tc.status || r.ErrorCode(t) != tc.code {
			t.Errorf("GET %s: %d %s, want %d %s", tc.path, r.Status, r.Body, tc.status, tc.code)
		}
	}
	var e struct {
		Error struct {
			Type  string  `json:"type"`
			Param *string `json:"param"`
		} `json:"error"`
	}
	get("/v1/graphs/nope/diagram.svg", key).Decode(t, &e)
	if e.Error.Type != "invalid_request_error" || e.Error.Param == nil || *e.Error.Param != "model" {
		t.Errorf("unknown model error %+v, want invalid_request_error with param model", e.Error)
	}
	if r := gw.Do(context.Background(), http.MethodPost, "/v1/graphs/support/diagram.svg", nil, key); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("POST diagram: %d, want 405", r.Status)
	}
}
