package gateway

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"unicode/utf8"
)

// A request's metadata is OpenAI's: at most 16 pairs, keys of at most 64
// characters, values of at most 512 (as strings). Its values are read as
// strings for enabled_when and memory scopes: "pro", 3 and true; a null
// value is no value, as an absent key is (a memory slot scoped by it is
// not offered, instead of one value "null" shared by every such caller).
// An object or an array has no string to be compared with: 400.

// OpenAI's bounds on metadata.
const (
	maxMetadataPairs = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

// checkMetadata refuses metadata OpenAI refuses, and values that are no
// scalar.
func checkMetadata(md map[string]json.RawMessage) *Error {
	if len(md) == 0 {
		return nil
	}
	if len(md) > maxMetadataPairs {
		return badRequest("metadata", "metadata has %d pairs; at most %d", len(md), maxMetadataPairs)
	}
	for _, k := range slices.Sorted(maps.Keys(md)) {
		raw := bytes.TrimSpace(md[k])
		param := "metadata." + k
		if utf8.RuneCountInString(k) > maxMetadataKey {
			return badRequest("metadata", "metadata key %q is longer than %d characters", k, maxMetadataKey)
		}
		if len(raw) > 0 && (raw[0] == '{' || raw[0] == '[') {
			return badRequest(param, "%s must be a string, a number or a boolean", param)
		}
		if v, ok := metadataValue(raw); ok && utf8.RuneCountInString(v) > maxMetadataValue {
			return badRequest(param, "%s is longer than %d characters", param, maxMetadataValue)
		}
	}
	return nil
}

// flattenMetadata turns metadata values into strings: "pro", 3 and true
// read "pro", "3" and "true"; a null value is left out.
func flattenMetadata(md map[string]json.RawMessage) map[string]string {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]string, len(md))
	for k, raw := range md {
		if v, ok := metadataValue(bytes.TrimSpace(raw)); ok {
			out[k] = v
		}
	}
	return out
}

// metadataValue reads one value as a string; not ok for null.
func metadataValue(raw []byte) (string, bool) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", false
	}
	var s string
	if raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return string(raw), true
}
