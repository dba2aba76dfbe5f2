package main

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	v, err := load("testdata/swagger.json")
	if err != nil {
		t.Fatal(err)
	}
	const good = `
apiVersion: v1
kind: Service
metadata: {name: web, labels: {app: web}}
spec:
  ports:
    - {port: 80, targetPort: http}
    - {port: 81, targetPort: 8081}
`
	tests := []struct {
		name, doc string
		skip      []string
		ok        bool
		want      string
	}{
		{"valid, int-or-string both ways", good, nil, true, "ok   Service/web (v1)"},
		{"unknown field", strings.Replace(good, "targetPort: http", "tragetPort: http", 1), nil, false, "'tragetPort' not allowed"},
		{"wrong type", strings.Replace(good, "port: 80", "port: eighty", 1), nil, false, "want integer"},
		{"missing required", strings.Replace(good, "port: 81, ", "", 1), nil, false, "missing property 'port'"},
		{"unknown kind", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", nil, false, "no schema"},
		{"skipped kind", "apiVersion: x/v1\nkind: Thing\nmetadata: {name: t}\n", []string{"Thing"}, true, "skip Thing/t"},
		{"nothing", "---\n", nil, false, "no objects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			if ok := v.check(strings.NewReader(tt.doc), &out, tt.skip, ""); ok != tt.ok || !strings.Contains(out.String(), tt.want) {
				t.Errorf("check = %v, output:\n%s\nwant %v and %q", ok, out.String(), tt.ok, tt.want)
			}
		})
	}
}
