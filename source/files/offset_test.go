package files

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
		k     int64
	}{
		{`{"logOffset":-1}`, -1},
		{`{"logOffset":0}`, 0},
		{`{"logOffset":7}`, 7},
		{`{"logOffset":9223372036854775807}`, 9223372036854775807},
	} {
		if got := EncodeOffset(tc.k); string(got) != tc.bytes {
			t.Errorf("EncodeOffset(%d) = %s, want %s", tc.k, got, tc.bytes)
		}
		if got, err := DecodeOffset(json.RawMessage(tc.bytes)); err != nil || got != tc.k {
			t.Errorf("DecodeOffset(%s) = %d, %v; want %d", tc.bytes, got, err, tc.k)
		}
	}
	for _, bad := range []string{``, `{}`, `{"logOffset":-2}`, `{"logOffset":null}`, `{"logOffset":"1"}`, `{"rows":1}`, `nope`} {
		if _, err := DecodeOffset(json.RawMessage(bad)); !errors.Is(err, ErrBadOffset) {
			t.Errorf("DecodeOffset(%s): err %v, want ErrBadOffset", bad, err)
		}
	}
}
