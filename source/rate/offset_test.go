package rate

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestOffsetBytesOfEarlierBuilds pins the offset bytes that checkpoints
// already hold: they were written by this package's own codec before it
// moved to source/internal/offset, and must decode, and encode, the same.
func TestOffsetBytesOfEarlierBuilds(t *testing.T) {
	for _, tc := range []struct {
		bytes string
		rows  int64
	}{
		{`{"rows":0}`, 0},
		{`{"rows":1}`, 1},
		{`{"rows":40000}`, 40000},
		{`{"rows":9223372036854775807}`, 9223372036854775807},
	} {
		if got := EncodeOffset(tc.rows); string(got) != tc.bytes {
			t.Errorf("EncodeOffset(%d) = %s, want %s", tc.rows, got, tc.bytes)
		}
		if got, err := DecodeOffset(json.RawMessage(tc.bytes)); err != nil || got != tc.rows {
			t.Errorf("DecodeOffset(%s) = %d, %v; want %d", tc.bytes, got, err, tc.rows)
		}
	}
	for _, bad := range []string{``, `{}`, `{"rows":-1}`, `{"rows":null}`, `{"rows":1.5}`, `{"events":1}`, `[1]`} {
		if _, err := DecodeOffset(json.RawMessage(bad)); !errors.Is(err, ErrBadOffset) {
			t.Errorf("DecodeOffset(%s): err %v, want ErrBadOffset", bad, err)
		}
	}
}
