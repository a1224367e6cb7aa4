package checkpoint

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/onceflow/onceflow/offsetlog"
)

type goldenCase struct {
	name  string
	entry bool // an offsetlog entry; else a metadata file
	v     any
}

// TestFormatsEncodeAsBefore pins the bytes of every checkpoint format:
// testdata/golden was written by the engine before these types moved here,
// and a checkpoint written by any build must read in any later one. A
// failure means a format changed: restore it, or bump FormatVersion and
// keep a reader for the old one.
func TestFormatsEncodeAsBefore(t *testing.T) {
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", "golden", c.name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			if c.entry {
				got, err = offsetlog.Encode(c.v)
			} else {
				got, err = EncodeMetadata(c.v)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("encoding changed:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// goldenCases are the values whose encodings testdata/golden holds, as
// the checkpoint stores them: log entries through offsetlog.Encode, the
// metadata file indented with a final newline.
func goldenCases() []goldenCase {
	return []goldenCase{
		{"metadata", false, Metadata{Version: 1, ID: "0123456789abcdef0123456789abcdef", Name: "payments", Created: "2026-11-30T10:00:00.123456789Z"}},
		{"metadata-fork", false, ForkMetadata{
			Metadata:   Metadata{Version: 1, ID: "fedcba9876543210fedcba9876543210", Name: "payments (fork of /cp at batch 3)", Created: "2026-12-01T00:00:00Z"},
			ForkedFrom: ForkedFrom{Location: "s3://bucket/cp", QueryID: "0123456789abcdef0123456789abcdef", Name: "payments", Batch: 3},
		}},
		{"offsets-full", true, OffsetsEntry{
			BatchID: 42, TimestampMs: 1796032800123, WatermarkMs: 1796032700000, RunID: "run-1",
			Sources: []SourceOffset{
				{Description: "kafka[payments]", Start: json.RawMessage(`{"v":2,"topics":{"payments":{"0":10}}}`), End: json.RawMessage(`{"v":2,"topics":{"payments":{"0":20}}}`)},
				{Description: "files[/in]", Start: json.RawMessage(`null`), End: json.RawMessage(`{"batch":3}`)},
			},
			Conf: Conf{
				StatePartitions: 4,
				Operators:       []OperatorConf{{ID: "agg-0", Kind: "aggregate", Keys: []string{"merchant_id"}, KeySchema: "merchant_id:utf8", StateSchema: "sum:int64"}},
				Sources:         []string{"kafka[payments]", "files[/in]"},
				SourceIDs:       []string{"kafka:payments", "files:/in"},
				Sinks:           []string{"filesink[/lake]"},
			},
		}},
		{"offsets-minimal", true, OffsetsEntry{Sources: []SourceOffset{{Description: "rate"}}, Conf: Conf{StatePartitions: 1}}},
		{"offsets-empty", true, OffsetsEntry{}},
		{"commit-full", true, CommitEntry{BatchID: 42, RunID: "run-1", NextWatermarkMs: 1796032750000, EventTimeMaxMs: []int64{1796032800000, 0}}},
		{"commit-minimal", true, CommitEntry{BatchID: 0, RunID: "run-0"}},
	}
}
