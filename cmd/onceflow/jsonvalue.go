package main

import (
	"encoding/json"
	"math"
)

// jsonValue returns v ready for encoding/json: non-finite floats, which
// JSON cannot hold, become the strings "NaN", "+Inf" and "-Inf".
func jsonValue(v any) any {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case float32:
		f = float64(x)
	default:
		return v
	}
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return v
}

func marshalValue(v any) ([]byte, error) { return json.Marshal(jsonValue(v)) }
