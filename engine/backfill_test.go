package engine

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/onceflow/onceflow/memsink"
)

func TestBackfillLine(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	src := func(start, end, latest string) SourceProgress {
		sp := SourceProgress{StartOffset: json.RawMessage(start), EndOffset: json.RawMessage(end)}
		if latest != "" {
			sp.LatestOffset = json.RawMessage(latest)
		}
		return sp
	}
	type step struct {
		at   time.Duration
		p    Progress
		want string
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"numbers with latest", []step{
			{time.Second, Progress{BatchID: 0, BatchDurationMs: 1000, NumInputRows: 100, Sources: []SourceProgress{src("0", "100", "400")}},
				"\rbackfill: batch 0 · offsets 100/400 (25%) · 100 rows/s · ETA 3s"},
			{2 * time.Second, Progress{BatchID: 1, NumInputRows: 100, Sources: []SourceProgress{src("100", "200", "400")}},
				"\rbackfill: batch 1 · offsets 200/400 (50%) · 100 rows/s · ETA 2s"},
			{4 * time.Second, Progress{BatchID: 2, NumInputRows: 200, Sources: []SourceProgress{src("200", "400", "400")}},
				"\rbackfill: batch 2 · offsets 400/400 (100%) · 100 rows/s · done \n"},
		}},
		{"kafka partitions, one new", []step{
			{time.Second, Progress{BatchID: 5, BatchDurationMs: 1000, NumInputRows: 30, Sources: []SourceProgress{
				src(`{"t":{"0":10,"1":20}}`, `{"t":{"0":30,"1":30,"2":5}}`, `{"t":{"0":50,"1":30,"2":25}}`)}},
				"\rbackfill: batch 5 · offsets 35/75 (47%) · 30 rows/s · ETA 1s"},
		}},
		{"no latest offset: no total", []step{
			{time.Second, Progress{BatchID: 0, BatchDurationMs: 500, NumInputRows: 10, Sources: []SourceProgress{src(`{"logOffset":-1}`, `{"logOffset":3}`, "")}},
				"\rbackfill: batch 0 · offsets 4 · 20 rows/s"},
			{2 * time.Second, Progress{BatchID: 1, NumInputRows: 10, Sources: []SourceProgress{src(`{"logOffset":3}`, `{"logOffset":4}`, "")}},
				"\rbackfill: batch 1 · offsets 5 · 13 rows/s"},
		}},
		{"opaque offsets are left out", []step{
			{time.Second, Progress{BatchID: 0, BatchDurationMs: 1000, NumInputRows: 7, Sources: []SourceProgress{src(`"abc"`, `"abd"`, `"abz"`)}},
				"\rbackfill: batch 0 · offsets 0/0 (100%) · 7 rows/s · done\n"},
		}},
		{"a shorter line pads over a longer one", []step{
			{time.Second, Progress{BatchID: 0, BatchDurationMs: 1000, NumInputRows: 1000000, Sources: []SourceProgress{src("0", "10", "")}},
				"\rbackfill: batch 0 · offsets 10 · 1000000 rows/s"},
			{1000 * time.Second, Progress{BatchID: 1, NumInputRows: 0, Sources: []SourceProgress{src("10", "11", "")}},
				"\rbackfill: batch 1 · offsets 11 · 1000 rows/s   "},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			now := t0
			b := newBackfillLine(&buf, func() time.Time { return now })
			for _, s := range tc.steps {
				now = t0.Add(s.at)
				buf.Reset()
				b.update(s.p)
				if buf.String() != s.want {
					t.Fatalf("batch %d:\n got %q\nwant %q", s.p.BatchID, buf.String(), s.want)
				}
			}
		})
	}
}

func TestBackfillStatusOnlyOnATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	for name, w := range map[string]interface{ Write([]byte) (int, error) }{"buffer": &bytes.Buffer{}, "file": f, "dev null": devnull} {
		if isTerminal(w) {
			t.Errorf("%s taken for a terminal", name)
		}
	}
	// A real query through the listener onto a file writes nothing.
	_, err = runQuery(t, ReadStream(newSeq(30, 10, 3)), WithCheckpoint(localStore(t)), WithSink(memsink.New("o")), WithTrigger(AvailableNow()),
		WithProgressListener(BackfillStatus(f)))
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := f.Stat(); st.Size() != 0 {
		t.Fatalf("wrote %d bytes to a file", st.Size())
	}
	pty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal to check the positive case: %v", err)
	}
	defer pty.Close()
	if !isTerminal(pty) {
		t.Error("a pseudo-terminal is not taken for a terminal")
	}
}
