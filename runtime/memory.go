package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/switchboard-ai/switchboard/graphs"
)

// Memory slots (CONTRACT §9, docs in README "Memory"). A run has a slot of
// its graph when it has a value for each of the slot's scope names; then
// every agent that runs in it is offered the slot's remember_ and recall_
// tools (a tool kind of their own, run by MemoryTools), and its system
// prompt carries the slot's facts in a <memory> block after its
// instructions. The block is read from the store at every model call, so a
// fact remembered in one turn is in the next model call's prompt, in this
// run and in any later one, on any gateway that shares the store.

// Codes of the memory tools' errors (docs/handoffs.md).
const codeTooLarge = "too_large"

// MemoryKeyFor returns the key of slot's value for a caller: the caller's
// principal, always (memory never crosses principals, even for a slot
// whose scope does not name principal), and value(name) for each of the
// slot's other scope names. When one of them has no value, or an empty one,
// missing names it and the caller has no such slot.
func MemoryKeyFor(slot *graphs.MemorySlot, principal string, value func(name string) string) (key MemoryKey, missing string) {
	key = MemoryKey{Principal: principal, Slot: slot.Name}
	for _, name := range slot.Scope {
		if name == graphs.ScopePrincipal {
			continue
		}
		v := value(name)
		if v == "" {
			return MemoryKey{}, name
		}
		key.Scope = append(key.Scope, ScopeValue{Name: name, Value: v})
	}
	return key, ""
}

// sessionOfRun is the session the run belongs to: its own, or for a
// sub-agent's run the session of the run that asked it.
func (ri *RunInfo) sessionOfRun() string {
	for p := ri; p != nil; p = p.Parent {
		if p.SessionID != "" {
			return p.SessionID
		}
	}
	return ""
}

// memoryKeyOf returns the key of slot's value for a run, and whether the
// run has one. A sub-agent's run has the session of the run it belongs to.
func memoryKeyOf(slot *graphs.MemorySlot, ri *RunInfo) (MemoryKey, bool) {
	key, missing := MemoryKeyFor(slot, ri.Principal, func(name string) string {
		if name == graphs.ScopeSession {
			return ri.sessionOfRun()
		}
		if k, ok := strings.CutPrefix(name, graphs.ScopeMetadataPrefix); ok {
			return ri.Metadata[k]
		}
		return ""
	})
	return key, missing == ""
}

// boundSlot is a slot of the graph that the run has a value for.
type boundSlot struct {
	slot *graphs.MemorySlot
	key  MemoryKey
}

// memory returns the run's slots, worked out once: its graph's slots that
// the run has scope values for. None when the Runner has no memory store.
func (rn *run) memory() []boundSlot {
	if rn.memBound {
		return rn.mem
	}
	rn.memBound = true
	if rn.opts.Memory == nil {
		return nil
	}
	for _, s := range rn.graph.Memory {
		if key, ok := memoryKeyOf(s, &rn.info); ok {
			rn.mem = append(rn.mem, boundSlot{slot: s, key: key})
		}
	}
	return rn.mem
}

// memoryTool returns the run's memory tool named name, or nil.
func (rn *run) memoryTool(name string) *graphs.Tool {
	if len(rn.memory()) == 0 {
		return nil
	}
	for _, t := range rn.graph.MemoryTools {
		if t.Name == name && rn.hasSlot(t.Memory.Slot) {
			return t
		}
	}
	return nil
}

// memoryTools lists the tools of the run's slots, in the graph's order.
func (rn *run) memoryTools() []*graphs.Tool {
	if len(rn.memory()) == 0 {
		return nil
	}
	var out []*graphs.Tool
	for _, t := range rn.graph.MemoryTools {
		if rn.hasSlot(t.Memory.Slot) {
			out = append(out, t)
		}
	}
	return out
}

// hasSlot reports whether the run has slot s.
func (rn *run) hasSlot(s *graphs.MemorySlot) bool {
	for _, b := range rn.memory() {
		if b.slot == s {
			return true
		}
	}
	return false
}

// instructions returns the current agent's instructions (and the graph's, settings.go) followed by a
// <memory> block per slot of the run, with the slot's facts as stored now.
func (rn *run) instructions(ctx context.Context) (string, error) {
	slots := rn.memory()
	if len(slots) == 0 {
		return instructionsFor(rn.agent, rn.graph), nil
	}
	var b strings.Builder
	b.WriteString(instructionsFor(rn.agent, rn.graph))
	for _, s := range slots {
		facts, err := rn.opts.Memory.Recall(ctx, s.key)
		if err != nil {
			return "", fmt.Errorf("recall memory %s: %w", s.slot.Name, err)
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(`<memory name="` + s.slot.Name + `">` + "\n")
		for _, f := range facts {
			b.WriteString(inBlock(f))
			b.WriteByte('\n')
		}
		b.WriteString("</memory>")
	}
	return b.String(), nil
}

// MemoryTools runs the remember_ and recall_ tools of memory slots
// (graphs.ToolMemory) against Store: register it in ToolKinds.
type MemoryTools struct {
	Store MemoryStore
}

var _ ToolRunner = MemoryTools{}

// Run remembers the call's fact or recalls the slot's facts, one per line.
func (m MemoryTools) Run(ctx context.Context, call *ToolInvocation) (string, error) {
	mt := call.Tool.Memory
	if mt == nil || m.Store == nil {
		return "", errors.New("memory is not configured")
	}
	key, ok := memoryKeyOf(mt.Slot, call.Run)
	if !ok {
		// The run offers no such tool; a call to it is answered before.
		return "", fmt.Errorf("this run has no memory %s", mt.Slot.Name)
	}
	if mt.Op == graphs.MemoryRecall {
		facts, err := m.Store.Recall(ctx, key)
		if err != nil {
			return "", storeFailure(err)
		}
		shown := make([]string, len(facts)) // facts may be the store's own
		for i, f := range facts {
			shown[i] = inBlock(f)
		}
		return strings.Join(shown, "\n"), nil
	}
	var args struct {
		Fact *string `json:"fact"`
	}
	if err := json.Unmarshal([]byte(call.Call.Function.Arguments), &args); err != nil || args.Fact == nil {
		return "", &ToolCodeError{Code: codeInvalidArgs, Message: `the arguments must be {"fact": string}`}
	}
	fact := oneLine(*args.Fact)
	if fact == "" {
		return "", &ToolCodeError{Code: codeInvalidArgs, Message: "the fact is empty"}
	}
	if len(fact) > mt.Slot.MaxBytes {
		return "", &ToolCodeError{Code: codeTooLarge, Message: fmt.Sprintf("the fact is %d bytes; memory %s holds at most %d", len(fact), mt.Slot.Name, mt.Slot.MaxBytes)}
	}
	dropped, err := m.Store.Remember(ctx, key, fact, mt.Slot.MaxBytes, mt.Slot.TTL)
	if errors.Is(err, ErrFactTooLarge) {
		return "", &ToolCodeError{Code: codeTooLarge, Message: err.Error()}
	}
	if err != nil {
		return "", storeFailure(err)
	}
	return fmt.Sprintf(`{"remembered": true, "dropped": %d}`, dropped), nil
}

// storeFailure is what the model reads of a store that failed: never the
// backend's own text, which may name internal addresses. ctx's errors pass
// as they are, so that a run whose client went away ends as such.
func storeFailure(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return errors.New("the memory store is unavailable")
}

// memoryTag matches what could open or close a <memory> block in a fact.
var memoryTag = regexp.MustCompile(`(?i)<(/?\s*memory)`)

// oneLine makes a fact one line, as the block and recall list facts one
// per line: line breaks become spaces, and the ends are trimmed. It is
// stored so, as the model wrote it otherwise: its size is its own
// (CONTRACT §9, max_bytes), and the memory API gives it back as written.
func oneLine(s string) string {
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
	return strings.TrimSpace(s)
}

// inBlock is a fact as the <memory> block and recall show it: what could
// open or close a block is written "&lt;memory" and "&lt;/memory", so that
// no fact ends its block early or starts another.
func inBlock(fact string) string {
	return memoryTag.ReplaceAllString(fact, "&lt;$1")
}
