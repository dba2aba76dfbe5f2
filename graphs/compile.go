package graphs

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"time"
)

// headerNamePattern is an HTTP header field name (RFC 9110 token).
var headerNamePattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// compile validates raw and builds the Set, recording every problem in p.
// It goes on after a problem so that one run reports them all; the Set it
// returns is only meaningful when p stays empty.
func compile(raw *rawConfig, builtin map[string]Provider, p *problems) *Set {
	set := &Set{
		Server:    compileServer(&raw.Server, p),
		Store:     compileStore(&raw.Store, p),
		Telemetry: compileTelemetry(&raw.Telemetry, p),
		Providers: compileProviders(raw.Providers, builtin, p),
	}
	tools := compileTools(raw.Tools, p)
	set.MCPServers = compileMCPServers(raw.MCPServers, p)
	principals := map[string]bool{}
	for _, k := range set.Server.APIKeys {
		principals[k.Name] = true
	}
	agents := compileAgents(raw.Agents, tools, set.Providers, principals, p)
	for _, name := range slices.Sorted(maps.Keys(raw.Agents)) {
		compileAgentMCP(agents[name], raw.Agents[name].MCP, set.MCPServers, p)
	}
	set.Graphs = compileGraphs(raw.Graphs, agents, p)
	set.Memory = compileMemory(raw.Memory, p)
	compileGraphMemory(raw.Graphs, set.Graphs, set.Memory, p)
	set.Guardrails = compileGuardrails(raw.Guardrails, set.Providers, p)
	compileGuardrailLists(raw, agents, set.Graphs, set.Guardrails, p)
	compileGraphPermissions(raw.Graphs, set.Graphs, principals, p)
	set.GraphNames = slices.Sorted(maps.Keys(set.Graphs))
	return set
}

// compileServer applies the defaults of `server:` and checks its values.
func compileServer(r *rawServer, p *problems) Server {
	s := Server{
		Listen:        r.Listen,
		SessionHeader: r.SessionHeader,
		Passthrough:   r.Passthrough,
		MaxBodyBytes:  DefaultMaxBodyBytes,
		DrainTimeout:  duration(r.DrainTimeout, DefaultDrainTimeout, "server.drain_timeout", p),
	}
	if s.Listen == "" {
		s.Listen = DefaultListen
	} else if _, port, err := net.SplitHostPort(s.Listen); err != nil {
		p.addf("server.listen: %q is not host:port (e.g. 127.0.0.1:8080 or :8080)", s.Listen)
	} else if _, err := net.LookupPort("tcp", port); err != nil {
		p.addf("server.listen: %q has no valid port (0 to 65535)", s.Listen)
	}
	if s.SessionHeader == "" {
		s.SessionHeader = DefaultSessionHeader
	} else if !headerNamePattern.MatchString(s.SessionHeader) {
		p.addf("server.session_header: %q is not a valid header name", s.SessionHeader)
	}
	if r.MaxBodyBytes != nil {
		if *r.MaxBodyBytes <= 0 {
			p.addf("server.max_body_bytes: must be a positive number of bytes, got %d", *r.MaxBodyBytes)
		} else {
			s.MaxBodyBytes = *r.MaxBodyBytes
		}
	}
	names, keys := map[string]int{}, map[string]int{}
	for i, k := range r.APIKeys {
		path := fmt.Sprintf("server.api_keys[%d]", i)
		switch {
		case k.Name == "":
			p.addf("%s: name is required", path)
		case hasControl(k.Name):
			p.addf("%s: name %q must not contain control characters", path, k.Name)
		default:
			if j, dup := names[k.Name]; dup {
				p.addf("%s: name %q is also used by server.api_keys[%d]", path, k.Name, j)
			}
			names[k.Name] = i
		}
		if k.Key == "" {
			// Often an unset ${VAR}: an empty key would let anyone in.
			p.addf("%s: key is required (is its ${VAR} set?)", path)
		} else {
			// The key itself is a secret: never echo it.
			if j, dup := keys[k.Key]; dup {
				p.addf("%s: key is the same as server.api_keys[%d]'s", path, j)
			}
			keys[k.Key] = i
		}
		s.APIKeys = append(s.APIKeys, APIKey{Name: k.Name, Key: k.Key, Limits: compileLimits(k.Limits, path, p)})
	}
	compileServerLimits(r, &s, p)
	return s
}

// compileStore applies the defaults of `store:`. The URL's scheme is left
// to the store package, which alone knows the backends it supports.
func compileStore(r *rawStore, p *problems) Store {
	s := Store{
		URL:        r.URL,
		SessionTTL: duration(r.SessionTTL, DefaultSessionTTL, "store.session_ttl", p),
		Timeout:    duration(r.Timeout, DefaultStoreTimeout, "store.timeout", p),
		LockLease:  duration(r.LockLease, DefaultLockLease, "store.lock_lease", p),
	}
	if s.URL == "" {
		s.URL = DefaultStoreURL
	}
	compileStoreLimits(r, &s, p)
	compileWaitReplicas(r, &s, p)
	return s
}

// compileTelemetry applies the defaults of `telemetry:`.
func compileTelemetry(r *rawTelemetry, p *problems) Telemetry {
	t := Telemetry{
		ServiceName:    r.ServiceName,
		OTLPEndpoint:   r.OTLPEndpoint,
		CaptureContent: r.CaptureContent,
	}
	if t.ServiceName == "" {
		t.ServiceName = DefaultServiceName
	}
	if t.OTLPEndpoint != "" {
		checkURL(t.OTLPEndpoint, "telemetry.otlp_endpoint", p)
	}
	return t
}

// compileProviders merges the file's providers over the built-in ones. A
// field set in the file wins; headers merge key by key.
func compileProviders(raw map[string]rawProvider, builtin map[string]Provider, p *problems) map[string]Provider {
	out := make(map[string]Provider, len(builtin)+len(raw))
	for name, b := range builtin {
		b.Name = name
		if b.Kind == "" {
			b.Kind = ProviderOpenAI
		}
		if b.Timeout == 0 {
			b.Timeout = DefaultProviderTimeout
		}
		b.Headers = maps.Clone(b.Headers)
		out[name] = b
	}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		r := raw[name]
		subject := fmt.Sprintf("provider %q", name)
		if name == "" || containsSlash(name) {
			// A model is "provider/model" split at the first "/": such a
			// provider could never be named.
			p.addf("%s: a provider name must be non-empty and contain no \"/\"", subject)
		}
		prov, ok := out[name]
		if !ok {
			prov = Provider{Name: name, Kind: ProviderOpenAI, Timeout: DefaultProviderTimeout}
		}
		if r.BaseURL != "" {
			prov.BaseURL = r.BaseURL
			checkURL(r.BaseURL, subject+": base_url", p)
		}
		if r.APIKey != "" {
			prov.APIKey = r.APIKey
		}
		prov.Timeout = duration(r.Timeout, prov.Timeout, subject+": timeout", p)
		if r.MaxRetries != nil {
			if *r.MaxRetries < 0 || *r.MaxRetries > 10 {
				p.addf("%s: max_retries must be between 0 and 10, got %d", subject, *r.MaxRetries)
			} else {
				n := *r.MaxRetries
				prov.MaxRetries = &n
			}
		}
		prov.StreamIdleTimeout = duration(r.StreamIdleTimeout, prov.StreamIdleTimeout, subject+": stream_idle_timeout", p)
		if len(r.Headers) > 0 {
			if prov.Headers == nil {
				prov.Headers = map[string]string{}
			}
			for _, k := range slices.Sorted(maps.Keys(r.Headers)) {
				if !headerNamePattern.MatchString(k) {
					p.addf("%s: headers: %q is not a valid header name", subject, k)
				}
				prov.Headers[k] = r.Headers[k]
			}
		}
		if prov.Kind != ProviderDemo && prov.BaseURL == "" {
			p.addf("%s: base_url is required (it is not a built-in provider)", subject)
		}
		compileProviderLimits(&r, &prov, subject, p)
		out[name] = prov
	}
	return out
}

// compileTools builds every tool of `tools:`, used or not.
func compileTools(raw map[string]rawTool, p *problems) map[string]*Tool {
	out := make(map[string]*Tool, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		r := raw[name]
		subject := fmt.Sprintf("tool %q", name)
		if !validToolName(name) {
			p.addf("%s: the name must match %s", subject, toolNamePattern)
		}
		t := &Tool{Name: name, Description: r.Description, Kind: ToolHTTP, HTTP: &HTTPTool{Timeout: DefaultToolTimeout}}
		if r.HTTP == nil || r.HTTP.URL == "" {
			p.addf("%s: http.url is required", subject)
		} else {
			t.HTTP.URL = r.HTTP.URL
			checkURL(t.HTTP.URL, subject+": http.url", p)
		}
		if r.HTTP != nil {
			t.HTTP.Timeout = duration(r.HTTP.Timeout, DefaultToolTimeout, subject+": http.timeout", p)
		}
		sch, err := compileSchema(&r.Parameters, defaultToolParameters)
		if err != nil {
			p.addf("%s: invalid parameters schema: %v", subject, err)
		} else {
			t.Parameters = sch.JSON
		}
		out[name] = t
	}
	return out
}

// compileGraphs builds each graph over the already compiled agents.
func compileGraphs(raw map[string]rawGraph, agents map[string]*Agent, p *problems) map[string]*Graph {
	if len(raw) == 0 {
		p.addf("no graphs defined; add one under `graphs:` with a lead agent")
	}
	out := make(map[string]*Graph, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		r := raw[name]
		subject := fmt.Sprintf("graph %q", name)
		if name == "" || hasControl(name) {
			p.addf("%s: a graph name must be non-empty and printable", subject)
		}
		g := &Graph{
			Name:        name,
			Description: r.Description,
			MaxHandoffs: limit(r.MaxHandoffs, DefaultMaxHandoffs, subject+": max_handoffs", p),
			MaxSteps:    limit(r.MaxSteps, DefaultMaxSteps, subject+": max_steps", p),
		}
		switch lead, ok := agents[r.Lead]; {
		case r.Lead == "":
			p.addf("%s: lead is required", subject)
		case !ok:
			p.addf("%s: unknown lead agent %q", subject, r.Lead)
		default:
			g.Lead = lead
			g.Agents = reachable(lead)
		}
		compileGraphLimits(&r, g, subject, p)
		compileGraphRun(&r, g, subject, p)
		out[name] = g
	}
	return out
}

// reachable returns lead and every agent reachable from it through
// handoffs, whatever their enabled_when: a condition depends on the
// request, the set of agents may not.
func reachable(lead *Agent) map[string]*Agent {
	out := map[string]*Agent{lead.Name: lead}
	queue := []*Agent{lead}
	for len(queue) > 0 {
		a := queue[0]
		queue = queue[1:]
		for _, h := range a.Handoffs {
			if h.Target == nil {
				continue
			}
			if _, seen := out[h.Target.Name]; !seen {
				out[h.Target.Name] = h.Target
				queue = append(queue, h.Target)
			}
		}
	}
	return out
}

// duration parses a Go duration, def when s is empty.
func duration(s string, def time.Duration, path string, p *problems) time.Duration {
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.addf("%s: %q is not a duration (write e.g. \"500ms\", \"30s\", \"24h\")", path, s)
		return def
	}
	if d <= 0 {
		p.addf("%s: must be positive, got %q", path, s)
		return def
	}
	return d
}

// limit applies a default to an optional count, which must be at least 1.
func limit(v *int, def int, path string, p *problems) int {
	if v == nil {
		return def
	}
	if *v < 1 {
		p.addf("%s: must be at least 1, got %d", path, *v)
		return def
	}
	return *v
}

// checkURL reports s unless it is an absolute http(s) URL.
func checkURL(s, path string, p *problems) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.addf("%s: %q is not an absolute http(s) URL", path, s)
	}
}
