// Package offset is the offset codec of the sources whose position is one
// integer (source/rate, source/nexmark, source/files): a JSON object with
// a single field, {"<field>":N}.
//
// Encode writes the same bytes for the same position, with no spaces:
// {"rows":42}. Those bytes are in existing checkpoints (the engine's
// offsets/N) and never change. Decode accepts what encoding/json accepts
// for a struct with that one field (unknown fields are ignored, the field
// name matches case-insensitively) and refuses a missing, null or
// non-integer field and a value below the codec's minimum, wrapping the
// source's own ErrBadOffset.
//
// A Codec is a value with no state; it is safe for concurrent use.
package offset

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
)

// Codec encodes and decodes one source's offsets.
type Codec struct {
	Field string // the JSON field: "rows", "events", "logOffset"
	Min   int64  // the smallest valid position
	Var   string // the position's name in messages: "N", "k"
	Err   error  // the sentinel every error wraps (the source's ErrBadOffset)
}

// Encode returns the offset JSON of position n.
func (c Codec) Encode(n int64) json.RawMessage {
	b := make([]byte, 0, len(c.Field)+25)
	b = append(b, `{"`...)
	b = append(b, c.Field...)
	b = append(b, `":`...)
	b = strconv.AppendInt(b, n, 10)
	return append(b, '}')
}

// Decode parses an offset written by Encode.
func (c Codec) Decode(off json.RawMessage) (int64, error) {
	// A struct with one field tagged c.Field gives encoding/json's own
	// matching rules; reflect caches the type.
	typ := reflect.StructOf([]reflect.StructField{{
		Name: "V",
		Type: reflect.TypeFor[*int64](),
		Tag:  reflect.StructTag(`json:"` + c.Field + `"`),
	}})
	v := reflect.New(typ)
	if err := json.Unmarshal(off, v.Interface()); err != nil {
		return 0, fmt.Errorf("%w: %q: %v; %s", c.Err, Trunc(off), err, c.want())
	}
	p := v.Elem().Field(0).Interface().(*int64)
	if p == nil || *p < c.Min {
		return 0, fmt.Errorf("%w: %q: %s", c.Err, Trunc(off), c.want())
	}
	return *p, nil
}

// Range decodes the offsets of a range [start, end), which must not end
// before it starts.
func (c Codec) Range(start, end json.RawMessage) (from, to int64, err error) {
	if from, err = c.Decode(start); err != nil {
		return 0, 0, err
	}
	if to, err = c.Decode(end); err != nil {
		return 0, 0, err
	}
	if to < from {
		return 0, 0, fmt.Errorf("%w: range end %d before start %d", c.Err, to, from)
	}
	return from, to, nil
}

func (c Codec) want() string {
	return fmt.Sprintf(`want {"%s":%s} with %s >= %d`, c.Field, c.Var, c.Var, c.Min)
}

// Trunc returns b as a string for messages, cut after 64 bytes.
func Trunc(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	return string(b)
}
