package files

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// FuzzJSONLine checks the hand-written parser against encoding/json: a line
// the parser accepts is valid JSON, and every value it parsed equals what
// encoding/json reads.
func FuzzJSONLine(f *testing.F) {
	for _, seed := range []string{
		`{"i":1,"f":2.5,"s":"x","b":true}`,
		`{"s":"a\"b\\c\u00e9\ud83d\ude00","i":-0,"f":1e-3,"z":[{"a":[]},null]}`,
		`{"i":01}`, `{"f":1.}`, `{"f":-}`, `{"i":1,}`, `{"s":"\u12"}`, `{}`, ` { } `,
		`{"i":9223372036854775807,"f":-1.5E+300}`, `{"x":{"y":[1,2,{"z":"}"}]},"b":false}`,
	} {
		f.Add([]byte(seed))
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	}, nil)
	cols, err := columnsOf(schema)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.ContainsAny(line, "\n") {
			return
		}
		p := newJSONParser(cols, "")
		if bad := p.parse(line); bad != nil {
			return
		}
		if !json.Valid(line) {
			t.Fatalf("accepted invalid JSON %q", line)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("accepted %q, encoding/json: %v", line, err)
		}
		for k, c := range p.cells {
			raw, ok := m[cols[k].name]
			if !ok || string(raw) == "null" {
				if !c.null {
					t.Fatalf("%q: column %s should be null", line, cols[k].name)
				}
				continue
			}
			switch cols[k].kind {
			case kindInt:
				want, err := strconv.ParseInt(string(raw), 10, 64)
				if err != nil || want != c.i {
					t.Fatalf("%q: int %d, encoding/json %s", line, c.i, raw)
				}
			case kindFloat:
				var want float64
				if err := json.Unmarshal(raw, &want); err != nil && !math.IsInf(c.f, 0) {
					t.Fatalf("%q: float %v, encoding/json: %v", line, c.f, err)
				} else if err == nil && want != c.f {
					t.Fatalf("%q: float %v, encoding/json %v", line, c.f, want)
				}
			case kindString:
				var want string
				if err := json.Unmarshal(raw, &want); err != nil || want != string(c.s) {
					t.Fatalf("%q: string %q, encoding/json %q", line, c.s, want)
				}
			case kindBool:
				var want bool
				if err := json.Unmarshal(raw, &want); err != nil || want != (c.i == 1) {
					t.Fatalf("%q: bool %v, encoding/json %s", line, c.i == 1, raw)
				}
			}
		}
	})
}
