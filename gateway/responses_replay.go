package gateway

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/switchboard-ai/switchboard/runtime"
)

// GET /v1/responses/{id}?stream=true is how OpenAI's clients stream a
// response created with `background: true` (`responses.retrieve(id,
// {stream: true, starting_after})`). The gateway runs every response
// within the request that creates it, so a stored response has ended: the
// stream replays it, as the event sequence a stream of it carries
// (responseRender), then [DONE]. The text of a response that was streamed
// is sent in the deltas its stream sent (responseRecord.Deltas), so that
// a sequence number of that stream names the same event in the replay and
// a client that lost the end of it can go on with starting_after; the
// text of one that was not is one delta a part. Sequence numbers count
// from 0 as in any stream, and starting_after leaves out the events up to
// that number. Without stream (or with
// stream=false) the reply is the stored response as JSON, as before.

// replayQuery reads stream and starting_after; replay is false for a
// JSON reply.
func replayQuery(c *gin.Context) (replay bool, after int, e *Error) {
	after = -1
	v, ok := c.GetQuery("stream")
	if !ok {
		return false, after, nil
	}
	replay, err := strconv.ParseBool(v)
	if err != nil {
		return false, after, badRequest("stream", "stream must be true or false")
	}
	if v, ok := c.GetQuery("starting_after"); ok && replay {
		n, err := strconv.Atoi(v)
		if err != nil || n < -1 {
			return false, after, badRequest("starting_after", "starting_after must be a sequence number (an integer from -1)")
		}
		after = n
	}
	return replay, after, nil
}

// storedResponse is a stored response read back, its output items left
// as they were written.
type storedResponse struct {
	responseObject
	Output []json.RawMessage `json:"output"`
}

// storedRaw holds the members of a stored response that the request gave
// as any JSON (a tool's parameters, tool_choice, text.format), as they were
// written: read into responseObject's `any` fields they would come back
// with their keys sorted and their large integers rounded.
type storedRaw struct {
	Tools []struct {
		Parameters json.RawMessage `json:"parameters"`
	} `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	Text       struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
}

// decodeStored reads a stored response, its request's JSON kept as written.
func decodeStored(raw []byte) (*storedResponse, error) {
	var stored storedResponse
	var kept storedRaw
	if err := json.Unmarshal(raw, &stored); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &kept); err != nil {
		return nil, err
	}
	for i := range stored.Tools {
		if i < len(kept.Tools) && kept.Tools[i].Parameters != nil {
			stored.Tools[i].Parameters = kept.Tools[i].Parameters
		}
	}
	if kept.ToolChoice != nil {
		stored.ToolChoice = kept.ToolChoice
	}
	if kept.Text.Format != nil {
		stored.Text.Format = kept.Text.Format
	}
	return &stored, nil
}

// replayResponse streams rec's response after sequence number after.
func (s *Server) replayResponse(c *gin.Context, id string, rec *responseRecord, after int) {
	stored, err := decodeStored(rec.Response)
	if err != nil {
		s.abort(c, fromRunError(fmt.Errorf("decode stored response %s: %w", id, err)))
		return
	}
	w := s.newResponsesSSE(c)
	w.holding, w.started = true, true
	defer w.stream.close()
	startEventStream(c)
	seq := 0
	send := func(typ string, ev any) {
		if seq > after {
			w.send(typ, ev)
		}
		seq++
	}
	// The response as it was when it began: in progress, with nothing
	// output nor counted yet (the metadata are the final ones).
	begun := stored.responseObject
	begun.Status, begun.CompletedAt, begun.IncompleteDetails, begun.Error = "in_progress", nil, nil, nil
	begun.Output, begun.Usage = []any{}, &responseUsage{}
	r := newResponseRender(&begun, true, send)
	r.begin()
	for i, raw := range stored.Output {
		var deltas []int
		if i < len(rec.Deltas) {
			deltas = rec.Deltas[i]
		}
		if !replayItem(r, raw, deltas) {
			s.log.Warn("a stored response's output item is not one the gateway writes", "response", id)
		}
	}
	typ := "response." + stored.Status
	if stored.Status != "incomplete" && stored.Status != "failed" {
		typ = "response.completed"
	}
	send(typ, &storedResponseEvent{Type: typ, SequenceNumber: seq, Response: rec.Response})
	w.done()
}

// storedResponseEvent is a replay's terminal event: the stored response
// exactly as GET returns it.
type storedResponseEvent struct {
	Type           string          `json:"type"`
	SequenceNumber int             `json:"sequence_number"`
	Response       json.RawMessage `json:"response"`
}

// replayItem renders one stored output item as its stream's events did,
// a message's text in pieces of the lengths deltas gives; false for an
// item of a type the gateway does not write.
func replayItem(r *responseRender, raw json.RawMessage, deltas []int) bool {
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &head) != nil {
		return false
	}
	switch head.Type {
	case "message":
		var m messageItem
		if json.Unmarshal(raw, &m) != nil {
			return false
		}
		r.openMessageAs(m.ID)
		for _, p := range m.Content {
			for _, piece := range splitText(p.Text, deltas) {
				r.text(piece)
			}
		}
		r.closeMessageAs(m.Status)
	case "function_call":
		var f functionCallItem
		if json.Unmarshal(raw, &f) != nil {
			return false
		}
		r.functionCallAs(f.ID, runtime.ToolCall{ID: f.CallID, Type: "function",
			Function: runtime.FunctionCall{Name: f.Name, Arguments: f.Arguments}})
	case "switchboard:handoff":
		var h handoffItem
		if json.Unmarshal(raw, &h) != nil {
			return false
		}
		r.handoffAs(h.ID, runtime.Event{Kind: runtime.EventHandoff, From: h.From, To: h.To, ToolCallID: h.ToolCallID})
	default:
		return false
	}
	return true
}

// splitText cuts text into pieces of the given lengths, which must make it
// up whole (else, as for a response that was not streamed, text is one
// piece); no pieces for no text.
func splitText(text string, lengths []int) []string {
	if text == "" {
		return nil
	}
	sum := 0
	for _, n := range lengths {
		if n <= 0 {
			return []string{text}
		}
		sum += n
	}
	if sum != len(text) {
		return []string{text}
	}
	pieces := make([]string, 0, len(lengths))
	for _, n := range lengths {
		pieces = append(pieces, text[:n])
		text = text[n:]
	}
	return pieces
}
