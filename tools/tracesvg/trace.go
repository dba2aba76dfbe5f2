package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// jaegerResponse is the body of Jaeger's GET /api/traces/<id> (the
// query service's JSON model; only the fields drawn are decoded).
type jaegerResponse struct {
	Data   []jaegerTrace `json:"data"`
	Errors []struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
	} `json:"errors"`
}

type jaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []jaegerSpan             `json:"spans"`
	Processes map[string]jaegerProcess `json:"processes"`
}

type jaegerSpan struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []jaegerRef `json:"references"`
	StartTime     int64       `json:"startTime"` // µs since the epoch
	Duration      int64       `json:"duration"`  // µs
	Tags          []jaegerTag `json:"tags"`
	ProcessID     string      `json:"processID"`
}

type jaegerRef struct {
	RefType string `json:"refType"` // CHILD_OF or FOLLOWS_FROM
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type jaegerTag struct {
	Key   string          `json:"key"`
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

type jaegerProcess struct {
	ServiceName string `json:"serviceName"`
}

// Trace is one trace ready to draw: its spans in display order (depth
// first, siblings by start time).
type Trace struct {
	ID    string
	Start int64 // µs since the epoch, of the earliest span
	End   int64 // µs since the epoch, of the latest span end
	Spans []*Span
}

// Span is one row of the waterfall.
type Span struct {
	ID        string
	Service   string
	Operation string
	Start     int64 // µs since the epoch
	Duration  int64 // µs
	Depth     int
	Tags      map[string]string
	// TagOrder lists the tag keys in the order Jaeger gave them.
	TagOrder []string

	parent   string
	children []*Span
}

// Error reports whether the span ended with an error status.
func (s *Span) Error() bool {
	return s.Tags["error"] == "true" || s.Tags["otel.status_code"] == "ERROR"
}

// Handoff reports whether the span is a Switchboard handoff.
func (s *Span) Handoff() bool {
	_, ok := s.Tags["switchboard.handoff.outcome"]
	return ok || strings.HasPrefix(s.Operation, "handoff ")
}

// decodeTrace reads a Jaeger /api/traces/<id> response and returns its
// first trace.
func decodeTrace(r io.Reader) (*Trace, error) {
	var resp jaegerResponse
	if err := json.NewDecoder(r).Decode(&resp); err != nil {
		return nil, fmt.Errorf("decode jaeger json: %w", err)
	}
	if len(resp.Errors) > 0 {
		return nil, fmt.Errorf("jaeger: %s (code %d)", resp.Errors[0].Msg, resp.Errors[0].Code)
	}
	if len(resp.Data) == 0 || len(resp.Data[0].Spans) == 0 {
		return nil, errors.New("no trace in the input")
	}
	return buildTrace(resp.Data[0]), nil
}

// buildTrace arranges a trace's spans into a tree. A span whose parent is
// not in the trace (the client's span, or one lost) is drawn as a root.
func buildTrace(jt jaegerTrace) *Trace {
	t := &Trace{ID: jt.TraceID}
	byID := make(map[string]*Span, len(jt.Spans))
	all := make([]*Span, 0, len(jt.Spans))
	for _, js := range jt.Spans {
		s := &Span{
			ID:        js.SpanID,
			Service:   jt.Processes[js.ProcessID].ServiceName,
			Operation: js.OperationName,
			Start:     js.StartTime,
			Duration:  js.Duration,
			Tags:      make(map[string]string, len(js.Tags)),
		}
		for _, ref := range js.References {
			if ref.RefType == "CHILD_OF" || s.parent == "" {
				s.parent = ref.SpanID
			}
		}
		for _, tag := range js.Tags {
			if _, dup := s.Tags[tag.Key]; !dup {
				s.TagOrder = append(s.TagOrder, tag.Key)
			}
			s.Tags[tag.Key] = tagString(tag.Value)
		}
		byID[s.ID] = s
		all = append(all, s)
		if t.Start == 0 || s.Start < t.Start {
			t.Start = s.Start
		}
		t.End = max(t.End, s.Start+s.Duration)
	}
	var roots []*Span
	for _, s := range all {
		if p, ok := byID[s.parent]; ok && p != s {
			p.children = append(p.children, s)
		} else {
			roots = append(roots, s)
		}
	}
	var walk func(spans []*Span, depth int)
	walk = func(spans []*Span, depth int) {
		sort.SliceStable(spans, func(i, j int) bool { return spans[i].Start < spans[j].Start })
		for _, s := range spans {
			s.Depth = depth
			t.Spans = append(t.Spans, s)
			walk(s.children, depth+1)
		}
	}
	walk(roots, 0)
	// Spans whose parents form a loop are reachable from no root; draw
	// them anyway rather than lose them.
	if len(t.Spans) < len(all) {
		seen := make(map[*Span]bool, len(t.Spans))
		for _, s := range t.Spans {
			seen[s] = true
		}
		for _, s := range all {
			if !seen[s] {
				s.Depth = 0
				t.Spans = append(t.Spans, s)
			}
		}
	}
	return t
}

// tagString renders a tag value as text: a string unquoted, a number or a
// bool as written (so a large int64 keeps every digit).
func tagString(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	return string(raw)
}
