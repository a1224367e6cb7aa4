package offset

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

var errBad = errors.New("test: bad offset")

func TestCodec(t *testing.T) {
	c := Codec{Field: "logOffset", Min: -1, Var: "k", Err: errBad}
	for _, n := range []int64{-1, 0, 7, 1 << 62} {
		got, err := c.Decode(c.Encode(n))
		if err != nil || got != n {
			t.Errorf("Decode(Encode(%d)) = %d, %v", n, got, err)
		}
	}
	tests := []struct {
		name, in string
		want     int64
		err      string // "" for none
	}{
		{"exact", `{"logOffset":3}`, 3, ""},
		{"spaces", ` { "logOffset" : 3 } `, 3, ""},
		{"unknown field ignored", `{"x":1,"logOffset":3}`, 3, ""},
		{"name matches case-insensitively", `{"LogOffset":3}`, 3, ""},
		{"missing", `{}`, 0, `test: bad offset: "{}": want {"logOffset":k} with k >= -1`},
		{"null", `{"logOffset":null}`, 0, `want {"logOffset":k}`},
		{"below the minimum", `{"logOffset":-2}`, 0, `want {"logOffset":k} with k >= -1`},
		{"not a number", `{"logOffset":"3"}`, 0, `cannot unmarshal string`},
		{"fraction", `{"logOffset":1.5}`, 0, `cannot unmarshal number 1.5`},
		{"not JSON", `nope`, 0, `invalid character`},
		{"empty", ``, 0, `unexpected end of JSON input`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Decode(json.RawMessage(tc.in))
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Fatalf("Decode(%s) = %d, %v; want %d", tc.in, got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, errBad) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("Decode(%s): %v; want errBad containing %q", tc.in, err, tc.err)
			}
		})
	}
}

func TestRange(t *testing.T) {
	c := Codec{Field: "rows", Min: 0, Var: "N", Err: errBad}
	if from, to, err := c.Range(c.Encode(2), c.Encode(5)); err != nil || from != 2 || to != 5 {
		t.Fatalf("Range = %d, %d, %v", from, to, err)
	}
	if _, _, err := c.Range(c.Encode(5), c.Encode(4)); !errors.Is(err, errBad) || !strings.Contains(err.Error(), "range end 4 before start 5") {
		t.Fatalf("reversed range: %v", err)
	}
	if _, _, err := c.Range(c.Encode(1), json.RawMessage(`{}`)); !errors.Is(err, errBad) {
		t.Fatalf("bad end: %v", err)
	}
}

func TestTrunc(t *testing.T) {
	long := strings.Repeat("x", 70)
	if got := Trunc([]byte(long)); got != strings.Repeat("x", 64)+"…" {
		t.Fatalf("Trunc = %q", got)
	}
	if got := Trunc([]byte("short")); got != "short" {
		t.Fatalf("Trunc = %q", got)
	}
}

func BenchmarkDecode(b *testing.B) {
	c := Codec{Field: "rows", Min: 0, Var: "N", Err: errBad}
	off := c.Encode(123456)
	for b.Loop() {
		if _, err := c.Decode(off); err != nil {
			b.Fatal(err)
		}
	}
}
