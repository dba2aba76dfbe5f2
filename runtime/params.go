package runtime

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
)

// IntParam is an integer sampling parameter (max_tokens, seed, ...). JSON
// has one kind of number: a client may write 1000 as 1e3 or 1000.0, and
// both are 1000 (CONTRACT §14). A fraction, or a value out of range, is
// refused like a value of the wrong type, naming the field.
type IntParam int

// UnmarshalJSON reads any JSON number whose value is a whole number.
func (p *IntParam) UnmarshalJSON(b []byte) error {
	if n, err := strconv.ParseInt(string(b), 10, 0); err == nil {
		*p = IntParam(n)
		return nil
	}
	refuse := func(what string) error {
		// encoding/json fills in the field's name on the way out.
		return &json.UnmarshalTypeError{Value: what, Type: reflect.TypeFor[int]()}
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		switch b[0] {
		case '"':
			return refuse("string")
		case 't', 'f':
			return refuse("bool")
		case '[':
			return refuse("array")
		case '{':
			return refuse("object")
		}
		return refuse("number out of range")
	}
	switch {
	case f != math.Trunc(f):
		return refuse("number with a fraction")
	case f < math.MinInt64 || f >= math.MaxInt64:
		return refuse("number out of range")
	}
	*p = IntParam(f)
	return nil
}
