package graphs

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Memory slots (CONTRACT §9): facts an agent remembers across sessions,
// bound to the values of the slot's scope (the caller's principal, the
// session id, request metadata), offered to every agent of a graph that
// lists the slot as remember_<slot> and recall_<slot> tools and as a
// <memory> block in its system prompt.

// Defaults of a memory slot.
const (
	DefaultMemoryMaxBytes = 4096
	DefaultMemoryTTL      = 720 * time.Hour
)

// The tool name prefixes of a slot's tools.
const (
	RememberPrefix = "remember_"
	RecallPrefix   = "recall_"
)

// slotNamePattern keeps remember_<slot> a valid tool name (64 bytes at most).
var slotNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,55}$`)

// rawMemorySlot is one entry of the top-level `memory:`.
type rawMemorySlot struct {
	// Description tells the model what the slot holds; default empty.
	Description string `yaml:"description"`
	// Scope names what binds one value of the slot: principal, session or
	// metadata.<key>; default [principal, session].
	Scope []string `yaml:"scope"`
	// MaxBytes bounds the facts of one value, in bytes; the oldest go
	// first; default 4096.
	MaxBytes *int `yaml:"max_bytes"`
	// TTL is how long a value lives after its last write, a Go duration;
	// default 720h.
	TTL string `yaml:"ttl"`
}

// Scope names.
const (
	ScopePrincipal      = "principal"
	ScopeSession        = "session"
	ScopeMetadataPrefix = "metadata."
)

// MemorySlot is one compiled memory slot.
type MemorySlot struct {
	Name        string
	Description string
	// Scope lists the scope names as written: "principal", "session" or
	// "metadata.<key>", each at most once.
	Scope    []string
	MaxBytes int           // default DefaultMemoryMaxBytes
	TTL      time.Duration // default DefaultMemoryTTL, refreshed on write
}

// RememberTool is the name of the slot's remember tool.
func (s *MemorySlot) RememberTool() string { return RememberPrefix + s.Name }

// RecallTool is the name of the slot's recall tool.
func (s *MemorySlot) RecallTool() string { return RecallPrefix + s.Name }

// MemoryOp says what a memory tool does.
type MemoryOp string

// The memory tools' operations.
const (
	MemoryRemember MemoryOp = "remember"
	MemoryRecall   MemoryOp = "recall"
)

// MemoryTool is a tool that remembers into or recalls from Slot.
type MemoryTool struct {
	Slot *MemorySlot
	Op   MemoryOp
}

// The memory tools' parameters.
var (
	rememberParameters = json.RawMessage(`{"type":"object","properties":{"fact":{"type":"string","description":"One fact, in one short line"}},"required":["fact"]}`)
	recallParameters   = json.RawMessage(`{"type":"object","properties":{}}`)
)

// memoryTools returns the remember_ and recall_ tools of s.
func memoryTools(s *MemorySlot) []*Tool {
	about := ""
	if s.Description != "" {
		about = " (" + s.Description + ")"
	}
	return []*Tool{
		{
			Name:        s.RememberTool(),
			Description: "Remembers one fact in the memory " + s.Name + about + ", for this and later conversations; the oldest facts go when it is full.",
			Parameters:  rememberParameters,
			Kind:        ToolMemory,
			Memory:      &MemoryTool{Slot: s, Op: MemoryRemember},
		},
		{
			Name:        s.RecallTool(),
			Description: "Returns the facts of the memory " + s.Name + about + ", one per line.",
			Parameters:  recallParameters,
			Kind:        ToolMemory,
			Memory:      &MemoryTool{Slot: s, Op: MemoryRecall},
		},
	}
}

// compileMemory builds every slot of `memory:`, used or not.
func compileMemory(raw map[string]rawMemorySlot, p *problems) map[string]*MemorySlot {
	if len(raw) == 0 {
		return nil
	}
	out := make(map[string]*MemorySlot, len(raw))
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		r := raw[name]
		subject := fmt.Sprintf("memory slot %q", name)
		if !slotNamePattern.MatchString(name) {
			p.addf("%s: the name must match %s (its tools are remember_<slot> and recall_<slot>)", subject, slotNamePattern)
		}
		s := &MemorySlot{
			Name:        name,
			Description: r.Description,
			MaxBytes:    DefaultMemoryMaxBytes,
			TTL:         duration(r.TTL, DefaultMemoryTTL, subject+": ttl", p),
		}
		if r.MaxBytes != nil {
			if *r.MaxBytes < 1 {
				p.addf("%s: max_bytes must be at least 1, got %d", subject, *r.MaxBytes)
			} else {
				s.MaxBytes = *r.MaxBytes
			}
		}
		s.Scope = compileScope(r.Scope, subject, p)
		out[name] = s
	}
	return out
}

// compileScope checks a slot's scope names; nil takes the default.
func compileScope(names []string, subject string, p *problems) []string {
	if names == nil {
		return []string{ScopePrincipal, ScopeSession}
	}
	if len(names) == 0 {
		p.addf("%s: scope must name at least one of principal, session, metadata.<key>", subject)
	}
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		switch {
		case n == ScopePrincipal, n == ScopeSession:
		case strings.HasPrefix(n, ScopeMetadataPrefix) && len(n) > len(ScopeMetadataPrefix) && !hasControl(n):
		default:
			p.addf("%s: unknown scope %q (use principal, session or metadata.<key>)", subject, n)
			continue
		}
		if seen[n] {
			p.addf("%s: scope %q is listed twice", subject, n)
			continue
		}
		seen[n] = true
		out = append(out, n)
	}
	return out
}

// compileGraphMemory attaches each graph's `memory:` slots, and reports a
// slot tool whose name an agent of the graph already uses for a tool or a
// handoff: the model could not tell the calls apart.
func compileGraphMemory(raw map[string]rawGraph, graphs map[string]*Graph, slots map[string]*MemorySlot, p *problems) {
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		g := graphs[name]
		if g == nil {
			continue
		}
		subject := fmt.Sprintf("graph %q", name)
		listed := map[string]bool{}
		for _, sn := range raw[name].Memory {
			s, ok := slots[sn]
			switch {
			case !ok:
				p.addf("%s: unknown memory slot %q", subject, sn)
				continue
			case listed[sn]:
				p.addf("%s: memory slot %q is listed twice", subject, sn)
				continue
			}
			listed[sn] = true
			g.Memory = append(g.Memory, s)
			g.MemoryTools = append(g.MemoryTools, memoryTools(s)...)
		}
		agents := withSubagents(g) // sub-agents run in the graph too
		for _, an := range slices.Sorted(maps.Keys(agents)) {
			a := agents[an]
			for _, s := range g.Memory {
				for _, tool := range []string{s.RememberTool(), s.RecallTool()} {
					if agentUses(a, tool) {
						p.addf("%s: memory slot %q: agent %q already has a tool or handoff named %q", subject, s.Name, a.Name, tool)
					}
				}
			}
		}
	}
}

// agentUses reports whether a has a tool or handoff named name.
func agentUses(a *Agent, name string) bool {
	for _, t := range a.Tools {
		if t.Name == name {
			return true
		}
	}
	for _, h := range a.Handoffs {
		if h.ToolName == name {
			return true
		}
	}
	return false
}
