package nexmark_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/onceflow/onceflow/source/nexmark"
)

// TestOffsetBytesOfEarlierBuilds pins the offset bytes that checkpoints
// already hold: they were written by this package's own codec before it
// moved to source/internal/offset, and must decode, and encode, the same.
func TestOffsetBytesOfEarlierBuilds(t *testing.T) {
	for _, tc := range []struct {
		bytes  string
		events int64
	}{
		{`{"events":0}`, 0},
		{`{"events":50}`, 50},
		{`{"events":1000000}`, 1000000},
		{`{"events":9223372036854775807}`, 9223372036854775807},
	} {
		if got := nexmark.EncodeOffset(tc.events); string(got) != tc.bytes {
			t.Errorf("EncodeOffset(%d) = %s, want %s", tc.events, got, tc.bytes)
		}
		if got, err := nexmark.DecodeOffset(json.RawMessage(tc.bytes)); err != nil || got != tc.events {
			t.Errorf("DecodeOffset(%s) = %d, %v; want %d", tc.bytes, got, err, tc.events)
		}
	}
	for _, bad := range []string{``, `{}`, `{"events":-1}`, `{"events":null}`, `{"events":"1"}`, `{"rows":1}`, `7`} {
		if _, err := nexmark.DecodeOffset(json.RawMessage(bad)); !errors.Is(err, nexmark.ErrBadOffset) {
			t.Errorf("DecodeOffset(%s): err %v, want ErrBadOffset", bad, err)
		}
	}
}
