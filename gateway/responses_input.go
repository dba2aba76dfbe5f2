package gateway

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"
)

// GET /v1/responses/{id}/input_items lists the items a stored response was
// made from, as OpenAI's API does (the official clients'
// responses.inputItems.list): the request's input only, without the
// instructions or what previous_response_id brought, each item with an id
// and status "completed", its content as parts. The items are kept with
// the stored response (responseRecord.Input), in the request's order.

// storedInputItems turns a request's input, already checked by
// decodeInput, into the items input_items lists: a string is one user
// message; a message's string content becomes one text part (input_text,
// output_text for the assistant), a list of parts takes OpenAI's shapes
// (listedParts); an item keeps the id it came with, or
// gets one.
func storedInputItems(raw json.RawMessage) []json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == 'n' {
		return nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil || s == "" {
			return nil
		}
		return []json.RawMessage{encodeItem(storedMessage{Type: "message", ID: newID("msg_"), Role: "user", Status: "completed", Content: textParts("user", s)})}
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil
	}
	out := make([]json.RawMessage, 0, len(items))
	for _, rawItem := range items {
		var it struct {
			inputItem
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(rawItem, &it) != nil {
			continue
		}
		switch it.Type {
		case "", "message":
			content := bytes.TrimSpace(it.Content)
			if len(content) > 0 && content[0] == '"' {
				var s string
				_ = json.Unmarshal(content, &s)
				content = textParts(it.Role, s)
			} else {
				content = listedParts(it.Role, content)
			}
			out = append(out, encodeItem(storedMessage{Type: "message", ID: itemID(it.ID, "msg_"), Role: it.Role, Status: "completed", Content: content}))
		case "function_call":
			out = append(out, encodeItem(functionCallItem{Type: "function_call", ID: itemID(it.ID, "fc_"), CallID: it.CallID, Name: it.Name, Arguments: it.Arguments, Status: "completed"}))
		case "function_call_output":
			// A list of text parts is listed as the text the model was
			// given, as a string is.
			text, _ := callOutputText(it.Output, "output")
			out = append(out, encodeItem(storedCallOutput{Type: "function_call_output", ID: itemID(it.ID, "fco_"), CallID: it.CallID, Output: encodeItem(text), Status: "completed"}))
		}
	}
	return out
}

// storedMessage is a message input item as input_items lists it.
type storedMessage struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Status  string          `json:"status"`
	Content json.RawMessage `json:"content"`
}

// storedCallOutput is a function_call_output input item as listed.
type storedCallOutput struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	CallID string          `json:"call_id"`
	Output json.RawMessage `json:"output"`
	Status string          `json:"status"`
}

// textParts is a message's string content as one part.
func textParts(role, s string) json.RawMessage {
	if role == "assistant" {
		return encodeItem([]outputText{newOutputText(s)})
	}
	return encodeItem([]map[string]string{{"type": "input_text", "text": s}})
}

// listedParts is a message's list of content parts in the shapes OpenAI
// lists them: a text part (input_text, output_text or text, as requests
// may send) as input_text, or for the assistant as a whole output_text;
// a refusal as sent; an image with its detail, "auto" when none was given.
// decodeMessageItem has already refused any other part.
func listedParts(role string, content json.RawMessage) json.RawMessage {
	var parts []contentPart
	_ = json.Unmarshal(content, &parts)
	out := make([]any, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			if role == "assistant" {
				out = append(out, newOutputText(p.Text))
			} else {
				out = append(out, map[string]string{"type": "input_text", "text": p.Text})
			}
		case "refusal":
			out = append(out, map[string]string{"type": "refusal", "refusal": p.Refusal})
		case "input_image":
			out = append(out, map[string]string{"type": "input_image", "image_url": p.ImageURL, "detail": cmp.Or(p.Detail, "auto")})
		}
	}
	return encodeItem(out)
}

// itemID is the id an item came with when it is a non-empty string, else
// a new one.
func itemID(raw json.RawMessage, prefix string) string {
	var id string
	if json.Unmarshal(raw, &id) == nil && id != "" {
		return id
	}
	return newID(prefix)
}

// encodeItem encodes v, which is made of strings and raw JSON that decoded.
func encodeItem(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("gateway: encode input item: " + err.Error())
	}
	return b
}

// itemList is OpenAI's list of items.
type itemList struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	FirstID string            `json:"first_id"`
	LastID  string            `json:"last_id"`
	HasMore bool              `json:"has_more"`
}

// listInputItems is GET /v1/responses/{id}/input_items: limit (1 to 100,
// default 20), order (desc, the default, or asc) and after (an item id of
// the list, which must be there) as in OpenAI's API; include is accepted
// and ignored.
func (s *Server) listInputItems(c *gin.Context) {
	limit := 20
	if v, ok := c.GetQuery("limit"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			s.abort(c, badRequest("limit", "limit must be an integer from 1 to 100"))
			return
		}
		limit = n
	}
	order := c.DefaultQuery("order", "desc")
	if order != "asc" && order != "desc" {
		s.abort(c, badRequest("order", "order must be asc or desc"))
		return
	}
	rec, e := s.loadResponse(c.Request.Context(), principal(c), c.Param("id"), "")
	if e != nil {
		s.abort(c, e)
		return
	}
	items := append([]json.RawMessage(nil), rec.Input...)
	if order == "desc" {
		slices.Reverse(items)
	}
	if after, ok := c.GetQuery("after"); ok {
		at := slices.IndexFunc(items, func(it json.RawMessage) bool { return idOf(it) == after })
		if at < 0 {
			s.abort(c, badRequest("after", "no input item %s in response %s", after, c.Param("id")))
			return
		}
		items = items[at+1:]
	}
	list := itemList{Object: "list", Data: items}
	if len(items) > limit {
		list.Data, list.HasMore = items[:limit], true
	}
	if n := len(list.Data); n > 0 {
		list.FirstID, list.LastID = idOf(list.Data[0]), idOf(list.Data[n-1])
	}
	if list.Data == nil {
		list.Data = []json.RawMessage{}
	}
	c.JSON(http.StatusOK, list)
}

// idOf is a listed item's id.
func idOf(item json.RawMessage) string {
	var head struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(item, &head)
	return head.ID
}
