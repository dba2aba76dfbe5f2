package runtime

import (
	"slices"
	"strings"
	"sync"
	"weak"
)

// A provider call's messages are built from a transcript (docs/handoffs.md):
// one leading system message made of the agent's instructions followed,
// each after a blank line, by every system and developer message of the
// transcript in order; then the other messages in order, cleaned so that
// every tool result follows its call and every call has its result. Local
// models' chat templates reject anything else.
//
// A session's transcript is its history, shared with the store, followed by
// what the run added. The messages are not copied: the call gets runs of
// the transcript (a Prompt), broken only where a message is left out or
// changed. And the reading of a history (which also finds the session's
// active agent) is remembered per session (promptCache), so that the next
// turn reads only what is new: building a call of turn 200 costs what
// building one of turn 2 does.

// Prompt is a provider call's messages in order, as consecutive runs: the
// messages are the runs' messages one after the other. A run may be part of
// a session's history, which the call shares with the store: a Model reads
// a Prompt and never changes it.
type Prompt [][]Message

// Len is the number of messages.
func (p Prompt) Len() int {
	n := 0
	for _, r := range p {
		n += len(r)
	}
	return n
}

// Flat returns the messages in one slice, a copy unless there is one run.
func (p Prompt) Flat() []Message {
	switch len(p) {
	case 0:
		return nil
	case 1:
		return p[0]
	}
	out := make([]Message, 0, p.Len())
	for _, r := range p {
		out = append(out, r...)
	}
	return out
}

// PromptOf returns a Prompt of msgs as they are.
func PromptOf(msgs ...Message) Prompt {
	if len(msgs) == 0 {
		return nil
	}
	return Prompt{msgs}
}

// The sources a prompt reads: srcs[fromHistory] and srcs[fromAdded].
const (
	fromHistory = iota
	fromAdded
)

// promptPart is one run of a prompt: messages [lo, hi) of its source; or,
// when drop is set, message lo alone without the tool calls drop names.
type promptPart struct {
	src    int
	lo, hi int
	drop   []string
}

// msgRef is message i of source src.
type msgRef struct{ src, i int }

// promptScan is the state of reading a transcript for a prompt. Reading
// history and then added gives what reading both as one transcript would.
// It refers to messages by position and holds none of their text, so that
// a cached scan keeps nothing of a conversation (see promptCache).
type promptScan struct {
	sys   []msgRef // the transcript's system and developer messages
	parts []promptPart
	// The assistant message whose tool calls are still being answered (its
	// part and its index in that part's source; part -1 when none), and
	// the ids of its calls with no result yet. A turn has few calls, so a
	// slice beats a map.
	openPart, openAt int
	pending          []string
	// marker is the `to` of the last handoff marker read, empty for none.
	marker string
}

func newPromptScan() promptScan { return promptScan{openPart: -1} }

// clone returns a copy of s that shares nothing it could change.
func (s *promptScan) clone() promptScan {
	c := *s
	c.sys = slices.Clip(s.sys) // only ever appended to
	c.parts = slices.Clone(s.parts)
	c.pending = slices.Clone(s.pending)
	return c
}

// read reads messages [from, len) of source src of srcs (history, added).
func (s *promptScan) read(srcs *[2][]Message, src, from int) {
	msgs := srcs[src]
	for i := from; i < len(msgs); i++ {
		m := &msgs[i]
		if m.Handoff != nil {
			s.marker = m.Handoff.To
		}
		switch {
		case m.IsSystem():
			s.sys = append(s.sys, msgRef{src, i})
		case m.Role == RoleTool:
			j := -1
			if s.openPart >= 0 {
				j = slices.Index(s.pending, m.ToolCallID)
			}
			if j < 0 {
				continue // a result without its call: dropped
			}
			s.pending = slices.Delete(s.pending, j, j+1)
			s.keep(src, i)
		default:
			s.closeOpen(srcs)
			s.keep(src, i)
			if m.Role == RoleAssistant && len(m.ToolCalls) > 0 {
				s.openPart, s.openAt = len(s.parts)-1, i
				for _, c := range m.ToolCalls {
					if !slices.Contains(s.pending, c.ID) {
						s.pending = append(s.pending, c.ID)
					}
				}
			}
		}
	}
}

// keep adds message i of source src, extending the last run when it is
// the message before.
func (s *promptScan) keep(src, i int) {
	if n := len(s.parts); n > 0 && s.parts[n-1].src == src && s.parts[n-1].hi == i && s.parts[n-1].drop == nil {
		s.parts[n-1].hi++
		return
	}
	s.parts = append(s.parts, promptPart{src: src, lo: i, hi: i + 1})
}

// closeOpen ends the open assistant message's turn: the calls left without
// a result are taken out of it, and it goes when nothing is left. Its run is
// split around it, and the changed message becomes a part of its own.
func (s *promptScan) closeOpen(srcs *[2][]Message) {
	if s.openPart < 0 {
		return
	}
	if len(s.pending) > 0 {
		p := s.parts[s.openPart]
		m := withoutCalls(srcs[p.src][s.openAt], s.pending)
		var repl []promptPart
		if p.lo < s.openAt {
			repl = append(repl, promptPart{src: p.src, lo: p.lo, hi: s.openAt})
		}
		if m.Content != "" || len(m.Parts) > 0 || len(m.ToolCalls) > 0 {
			repl = append(repl, promptPart{src: p.src, lo: s.openAt, hi: s.openAt + 1, drop: slices.Clone(s.pending)})
		}
		if s.openAt+1 < p.hi {
			repl = append(repl, promptPart{src: p.src, lo: s.openAt + 1, hi: p.hi})
		}
		s.parts = slices.Replace(s.parts, s.openPart, s.openPart+1, repl...)
	}
	s.openPart, s.pending = -1, s.pending[:0]
}

// prompt returns the call's messages for an agent with instructions.
func (s *promptScan) prompt(instructions string, srcs *[2][]Message) Prompt {
	var sys strings.Builder
	sys.WriteString(instructions)
	var last map[string]int // with several: where each client text comes last
	if len(s.sys) > 1 {
		last = make(map[string]int, len(s.sys))
		for j, r := range s.sys {
			if k, ok := foldKey(&srcs[r.src][r.i]); ok {
				last[k] = j
			}
		}
	}
	for j, r := range s.sys {
		m := &srcs[r.src][r.i]
		text := m.Content
		if k, ok := foldKey(m); ok && last != nil && last[k] != j {
			// The same context sent again (an agent SDK sends its
			// instructions with every turn): said once, where it was
			// said last, or a long session's prompt would repeat it
			// with every turn.
			continue
		}
		if sys.Len() > 0 {
			sys.WriteString("\n\n")
		}
		sys.WriteString(text)
	}
	out := make(Prompt, 0, len(s.parts)+1)
	if sys.Len() > 0 {
		out = append(out, []Message{{Role: RoleSystem, Content: sys.String()}})
	}
	for i := range s.parts {
		p := &s.parts[i]
		if p.drop != nil {
			out = append(out, []Message{withoutCalls(srcs[p.src][p.lo], p.drop)})
			continue
		}
		out = append(out, srcs[p.src][p.lo:p.hi:p.hi])
	}
	return out
}

// foldKey is what tells a client's system or developer message from
// another it repeats (its role, name and text); not ok for a routing note,
// each of which stays (the same handoff twice is two notes).
func foldKey(m *Message) (string, bool) {
	if m.Handoff != nil {
		return "", false
	}
	return m.Role + "\x00" + m.Name + "\x00" + m.Content, true
}

// providerMessages builds a call's messages from history followed by
// added, reading both whole.
func providerMessages(instructions string, history, added []Message) Prompt {
	s := newPromptScan()
	s.read(&[2][]Message{history, nil}, fromHistory, 0)
	return s.promptWith(instructions, history, added)
}

// promptWith builds a call's messages from history, which s is the scan
// of, followed by added; s does not change.
func (s *promptScan) promptWith(instructions string, history, added []Message) Prompt {
	c := s.clone()
	srcs := &[2][]Message{history, added}
	c.read(srcs, fromAdded, 0)
	c.closeOpen(srcs)
	return c.prompt(instructions, srcs)
}

// promptCache remembers, per session, how the history a run loaded reads
// for a prompt. The next turn loads the same history grown by a few
// messages, in the same memory (stores only append past what they handed
// out; see Store): it reads only those. An entry holds a weak pointer to
// the history's first message and positions in it, so it keeps nothing of
// the conversation, and is used only while that message is still the
// first of the history loaded, which a store that rewrote the session (a
// filter's Replace) or forgot it has changed. The gateway forgets a
// session's entry when the session is deleted (Runner.ForgetSession).
type promptCache struct {
	mu      sync.Mutex
	entries map[SessionKey]*promptEntry
}

type promptEntry struct {
	first weak.Pointer[Message]
	n     int        // the history's messages read
	scan  promptScan // never changed once cached
}

// promptCacheEntries bounds the cache; a session past it is read whole on
// its next turn.
const promptCacheEntries = 4096

// history returns the scan of a session's history, reading only what the
// session's entry has not read yet.
func (c *promptCache) history(key SessionKey, history []Message) promptScan {
	s, from := c.lookup(key, history)
	s.read(&[2][]Message{history, nil}, fromHistory, from)
	if len(history) > from {
		c.store(key, history, s.clone())
	}
	return s
}

// lookup returns a copy of the scan of history's first n messages, and n.
func (c *promptCache) lookup(key SessionKey, history []Message) (promptScan, int) {
	if len(history) == 0 {
		return newPromptScan(), 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[key]; e != nil && e.n <= len(history) && e.first.Value() == &history[0] {
		return e.scan.clone(), e.n
	}
	return newPromptScan(), 0
}

// store caches s, the scan of the whole history, for key.
func (c *promptCache) store(key SessionKey, history []Message, s promptScan) {
	e := &promptEntry{first: weak.Make(&history[0]), n: len(history), scan: s}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = make(map[SessionKey]*promptEntry)
	}
	if _, ok := c.entries[key]; !ok && len(c.entries) >= promptCacheEntries {
		for k := range c.entries { // an arbitrary one
			delete(c.entries, k)
			break
		}
	}
	c.entries[key] = e
}

// withoutCalls returns m without the tool calls whose ids are in drop.
func withoutCalls(m Message, drop []string) Message {
	kept := make([]ToolCall, 0, len(m.ToolCalls))
	for _, c := range m.ToolCalls {
		if !slices.Contains(drop, c.ID) {
			kept = append(kept, c)
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	m.ToolCalls = kept
	return m
}

// forget drops key's entry.
func (c *promptCache) forget(key SessionKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
}
