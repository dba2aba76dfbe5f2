package gateway

import (
	"bytes"
	"encoding/json"

	"github.com/switchboard-ai/switchboard/runtime"
)

// The checks of a request's generation parameters that every
// OpenAI-compatible provider makes alike, made before the run: left to the
// provider, its 400 would come back as a 502, which OpenAI's SDKs retry.
// Limits providers differ on are left to them: how many stop sequences, a
// bound on max_tokens (a max_tokens of 0: OpenAI refuses it, watsonx reads
// it as the model's default, and openai-go's generated tests send it; a
// negative one: Ollama reads -1 as no limit).

// checkParams checks a chat request's parameters.
func checkParams(p *runtime.Params) *Error {
	return checkFormat(p.ResponseFormat, "response_format", "json_schema")
}

// checkFormat checks a response format, null or absent being none: an
// object whose type is text, json_object or json_schema, a json_schema one
// naming its schema. Chat's response_format holds the name in its
// json_schema object (schemaKey "json_schema"), Responses' text.format
// beside its type (schemaKey "").
func checkFormat(raw json.RawMessage, param, schemaKey string) *Error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var f map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &f) != nil {
		return badRequest(param, "%s must be an object whose type is text, json_object or json_schema", param)
	}
	var typ string
	_ = json.Unmarshal(f["type"], &typ) // a type that is no string is no known type
	switch typ {
	case "text", "json_object":
		return nil
	case "json_schema":
	default:
		return badRequest(param+".type", "%s.type must be text, json_object or json_schema", param)
	}
	schema, nameParam := f, param+".name"
	if schemaKey != "" {
		schema, nameParam = nil, param+"."+schemaKey+".name"
		_ = json.Unmarshal(f[schemaKey], &schema) // not an object: no name
	}
	var name string
	if json.Unmarshal(schema["name"], &name) != nil || name == "" {
		return badRequest(nameParam, "%s is required for a json_schema format", nameParam)
	}
	return nil
}
