package gateway_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/switchboard-ai/switchboard/internal/fakeupstream"
	"github.com/switchboard-ai/switchboard/internal/gwtest"
)

// memoryYAML is a desk whose agents share a customer profile (scoped by
// principal and metadata.customer_id) and session notes (the default scope).
const memoryYAML = `
server:
  api_keys:
    - {name: acme, key: key-acme}
    - {name: globex, key: key-globex}
providers:
  fake: {base_url: "${FAKE_URL}", timeout: 5s}
memory:
  customer_profile:
    description: Facts about the customer that every desk should know
    scope: [principal, metadata.customer_id]
    max_bytes: 40
  notes: {description: Notes of this conversation}
agents:
  triage:
    description: Routes the user
    instructions: You are the triage desk.
    model: fake/triage-model
    handoffs: [billing]
  billing:
    description: Answers questions about charges
    instructions: You are the billing desk.
    model: fake/billing-model
graphs:
  support: {lead: triage, memory: [customer_profile, notes]}
  plain: {lead: billing}
`

// memoryDesk starts the memory desk on a store.
func memoryDesk(t *testing.T, storeURL string, replies ...fakeupstream.Reply) (*gwtest.Gateway, *fakeupstream.Server) {
	t.Helper()
	fake := fakeupstream.New(t, replies...)
	fake.SetStrict(true)
	gw := gwtest.Start(t, memoryYAML+"store: {url: \""+storeURL+"\"}\n", map[string]string{"FAKE_URL": fake.URL})
	return gw, fake
}

func bearer(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }

// memoryBody is the body of GET /v1/memory/{slot}.
type memoryBody struct {
	Slot  string   `json:"slot"`
	Facts []string `json:"facts"`
}

// getMemory reads a slot through the API; query holds its scope values.
func getMemory(t *testing.T, gw *gwtest.Gateway, key, slot string, query url.Values) []string {
	t.Helper()
	resp := gw.Do(context.Background(), http.MethodGet, "/v1/memory/"+slot+"?"+query.Encode(), nil, bearer(key))
	if resp.Status != http.StatusOK {
		t.Fatalf("GET memory %s: status %d: %s", slot, resp.Status, resp.Body)
	}
	var m memoryBody
	resp.Decode(t, &m)
	if m.Slot != slot || m.Facts == nil {
		t.Fatalf("GET memory %s: %s", slot, resp.Body)
	}
	return m.Facts
}

func TestMemoryAPIErrors(t *testing.T) {
	gw, _ := memoryDesk(t, "memory://")
	tests := []struct {
		name, method, path string
		status             int
		code, param        string
	}{
		{"unknown slot", http.MethodGet, "/v1/memory/nope?session=s1", http.StatusNotFound, "memory_slot_not_found", "slot"},
		{"unknown slot delete", http.MethodDelete, "/v1/memory/nope", http.StatusNotFound, "memory_slot_not_found", "slot"},
		{"missing metadata scope", http.MethodGet, "/v1/memory/customer_profile?customer_id=c1", http.StatusBadRequest, "invalid_request", "metadata.customer_id"},
		{"missing session scope", http.MethodDelete, "/v1/memory/notes", http.StatusBadRequest, "invalid_request", "session"},
		{"empty scope value", http.MethodGet, "/v1/memory/notes?session=", http.StatusBadRequest, "invalid_request", "session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := gw.Do(context.Background(), tt.method, tt.path, nil, bearer("key-acme"))
			if resp.Status != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.Status, tt.status, resp.Body)
			}
			var e struct {
				Error struct{ Message, Type, Param, Code string }
			}
			resp.Decode(t, &e)
			if e.Error.Code != tt.code || e.Error.Param != tt.param || e.Error.Message == "" {
				t.Errorf("error %+v, want code %s param %s", e.Error, tt.code, tt.param)
			}
		})
	}
	// Without a key, nothing is told.
	if resp := gw.Do(context.Background(), http.MethodGet, "/v1/memory/notes?session=s1", nil, nil); resp.Status != http.StatusUnauthorized {
		t.Errorf("without a key: status %d", resp.Status)
	}
	// A slot nothing was remembered in reads empty, and deletes.
	if got := getMemory(t, gw, "key-acme", "notes", url.Values{"session": {"s1"}}); len(got) != 0 {
		t.Errorf("empty slot: %q", got)
	}
	if resp := gw.Do(context.Background(), http.MethodDelete, "/v1/memory/notes?session=s1", nil, bearer("key-acme")); resp.Status != http.StatusNoContent {
		t.Errorf("DELETE: status %d: %s", resp.Status, resp.Body)
	}
}
