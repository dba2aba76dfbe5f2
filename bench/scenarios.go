package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
)

// gatewayConfig is the gateway's config for the benchmark: graph "plain"
// (one agent, the same model as the direct requests) and graph "support"
// (triage hands off to billing, which calls the HTTP tool lookup_charges);
// "plain_long" is "plain" again, for the long sessions of the session-length
// measurement, so that their overhead is counted apart.
const gatewayConfig = `server:
  session_header: X-Session-Id
store:
  url: %s
providers:
  fake:
    base_url: %s
    api_key: bench
tools:
  lookup_charges:
    description: Lists the user's recent charges
    parameters: {type: object, properties: {}}
    http: {url: "%s", timeout: 5s}
agents:
  assistant:
    instructions: You are a helpful assistant.
    model: fake/plain
  triage:
    instructions: You are the triage desk of ACME. Hand off to billing for charges.
    model: fake/triage
    handoffs: [billing]
  billing:
    description: Answers questions about charges
    instructions: You are ACME's billing desk. Use lookup_charges before you answer.
    model: fake/billing
    tools: [lookup_charges]
graphs:
  plain: {lead: assistant}
  plain_long: {lead: assistant}
  support: {lead: triage}
`

// writeConfig writes a gateway config with store URL storeURL into dir.
func writeConfig(dir, name, storeURL string, up *upstream) (string, error) {
	path := filepath.Join(dir, name+".yaml")
	cfg := fmt.Sprintf(gatewayConfig, storeURL, up.url(), up.chargesURL())
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return "", fmt.Errorf("write config: %w", err)
	}
	return path, nil
}

// The request bodies. The direct requests and the gateway's are the same
// bytes: graph "plain" calls upstream model "plain".
var (
	plainBody   = []byte(`{"model":"plain","messages":[{"role":"system","content":"Answer briefly."},{"role":"user","content":"Hello there, what can you do for me today?"}]}`)
	streamBody  = []byte(`{"model":"plain","stream":true,"messages":[{"role":"system","content":"Answer briefly."},{"role":"user","content":"Hello there, what can you do for me today?"}]}`)
	handoffBody = []byte(`{"model":"support","messages":[{"role":"user","content":"What did you charge me for last month?"}]}`)

	// The upstream calls of a handoff run, as a client doing the run
	// itself would make them.
	directHandoff = [][]byte{
		[]byte(`{"model":"triage","messages":[{"role":"system","content":"You are the triage desk of ACME. Hand off to billing for charges."},{"role":"user","content":"What did you charge me for last month?"}],"tools":[{"type":"function","function":{"name":"transfer_to_billing","description":"Hand off to billing","parameters":{"type":"object","properties":{}}}}]}`),
		[]byte(`{"model":"billing","messages":[{"role":"system","content":"You are ACME's billing desk. Use lookup_charges before you answer.\n\nYou are now billing; triage handed off."},{"role":"user","content":"What did you charge me for last month?"},{"role":"assistant","tool_calls":[{"id":"call_transfer","type":"function","function":{"name":"transfer_to_billing","arguments":"{}"}}]},{"role":"tool","content":"{\"assistant\":\"billing\"}","tool_call_id":"call_transfer"}],"tools":[{"type":"function","function":{"name":"lookup_charges","description":"Lists the user's recent charges","parameters":{"type":"object","properties":{}}}}]}`),
		[]byte(`{}`), // lookup_charges
		[]byte(`{"model":"billing","messages":[{"role":"system","content":"You are ACME's billing desk. Use lookup_charges before you answer.\n\nYou are now billing; triage handed off."},{"role":"user","content":"What did you charge me for last month?"},{"role":"assistant","tool_calls":[{"id":"call_transfer","type":"function","function":{"name":"transfer_to_billing","arguments":"{}"}}]},{"role":"tool","content":"{\"assistant\":\"billing\"}","tool_call_id":"call_transfer"},{"role":"assistant","tool_calls":[{"id":"call_lookup","type":"function","function":{"name":"lookup_charges","arguments":"{}"}}]},{"role":"tool","content":"{\"charges\":[{\"id\":\"ch_1\",\"amount\":1999,\"currency\":\"usd\",\"date\":\"2025-05-02\"}]}","tool_call_id":"call_lookup"}],"tools":[{"type":"function","function":{"name":"lookup_charges","description":"Lists the user's recent charges","parameters":{"type":"object","properties":{}}}}]}`),
	}
)

// turnsPerSession is how many turns a session job makes in one session
// before it starts the next, so that sessions stay of a typical length.
const turnsPerSession = 10

// plainJob posts body to url.
func plainJob(c *http.Client, url string, body []byte) job {
	return func(ctx context.Context, _, _ int) (sample, error) {
		return post(ctx, c, url, body, nil)
	}
}

// streamJob posts a streamed body to url.
func streamJob(c *http.Client, url string, body []byte) job {
	return func(ctx context.Context, _, _ int) (sample, error) {
		return postStream(ctx, c, url, body)
	}
}

// sessionJob sends each worker's requests as the turns of its own
// sessions, turnsPerSession turns each; every request brings one new user
// message, as a session client does.
func sessionJob(c *http.Client, url, prefix string) job {
	type worker struct{ turns, sess int }
	ws := make([]worker, 512)
	return func(ctx context.Context, w, _ int) (sample, error) {
		st := &ws[w]
		if st.turns == turnsPerSession {
			st.turns, st.sess = 0, st.sess+1
		}
		st.turns++
		id := prefix + "-" + strconv.Itoa(w) + "-" + strconv.Itoa(st.sess)
		body := []byte(`{"model":"plain","messages":[{"role":"user","content":"Turn ` + strconv.Itoa(st.turns) + `: hello there, what can you do for me today?"}]}`)
		return post(ctx, c, url, body, map[string]string{"X-Session-Id": id})
	}
}

// directHandoffJob makes the upstream calls and the tool call of a handoff
// run one after the other, as a client without the gateway would.
func directHandoffJob(c *http.Client, up *upstream) job {
	return func(ctx context.Context, _, _ int) (sample, error) {
		var total sample
		for i, body := range directHandoff {
			url := up.url() + "/chat/completions"
			if i == 2 {
				url = up.chargesURL()
			}
			s, err := post(ctx, c, url, body, nil)
			if err != nil {
				return sample{}, err
			}
			total.lat += s.lat
		}
		return total, nil
	}
}
