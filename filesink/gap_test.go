package filesink

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/offsetlog"
)

// Regression: a log with a hole in its batch ids (0, 1, 4: a table
// restored from an incomplete copy) loaded without error, as the table at
// version 4 without batches 2 and 3. Now loading fails, naming the missing
// batches and the log object after them. Holes that compaction leaves
// (deltas covered by a compact file, purged) are not holes.
func TestLogWithMissingBatchesIsRefused(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		batches []int64 // written in order, compacting every 5 unless compact says
		compact int64
		remove  []string
		want    []string // parts of the error; nil: loads
		version int64
	}{
		{name: "no hole", batches: seq(0, 5), version: 4},
		{name: "0, 1, 4", batches: seq(0, 5), compact: 10, remove: []string{deltaName(2), deltaName(3)}, want: []string{"batches 2 to 3", deltaName(4)}},
		{name: "one missing", batches: seq(0, 4), remove: []string{deltaName(1)}, want: []string{"batch 1 ", deltaName(2)}},
		{name: "first after the compact file missing", batches: seq(0, 8), remove: []string{deltaName(5)}, want: []string{"batch 5 ", deltaName(6)}},
		{name: "covered by the compact file", batches: seq(0, 8), remove: []string{deltaName(1), deltaName(3)}, version: 7},
		{name: "purged by compaction", batches: seq(0, 12), version: 11}, // compacts 4 and 9, deltas 0..4 purged
		{name: "hole after purge", batches: seq(0, 13), remove: []string{deltaName(11)}, want: []string{"batch 11 ", deltaName(12)}},
		{name: "a table that starts at a fork's batch", batches: seq(7, 10), version: 9},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMem(t)
			table, dir := openTable(t)
			if tc.compact == 0 {
				tc.compact = 5
			}
			s, err := New(table, WithCompactEvery(tc.compact))
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range tc.batches {
				addBatch(t, ctx, s, mem, paySchema, b, int(b)*10, int(b)*10+10, 10)
			}
			for _, name := range tc.remove {
				if err := os.Remove(filepath.Join(dir, filepath.FromSlash(name))); err != nil {
					t.Fatal(err)
				}
			}
			v, err := Version(ctx, table)
			if tc.want == nil {
				if err != nil || v != tc.version {
					t.Fatalf("Version = %d, %v; want %d", v, err, tc.version)
				}
				return
			}
			if !errors.Is(err, ErrMissingBatches) || !errors.Is(err, offsetlog.ErrCorrupt) {
				t.Fatalf("Version = %d, %v; want ErrMissingBatches", v, err)
			}
			t.Logf("refusal: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q: %v", w, err)
				}
			}
			// The sink refuses the table too, and the reader.
			s2, _ := New(table, WithCompactEvery(tc.compact))
			if _, _, err := s2.LastBatchID(ctx); !errors.Is(err, ErrMissingBatches) {
				t.Errorf("sink LastBatchID: %v", err)
			}
			if _, err := Committed(ctx, table); !errors.Is(err, ErrMissingBatches) {
				t.Errorf("Committed: %v", err)
			}
		})
	}
}

// A batch id beyond the table's next one would leave a hole that the log
// then refuses: AddBatch refuses it and writes nothing.
func TestAddBatchLeavingAHoleIsRefused(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	table, _ := openTable(t)
	s, err := New(table)
	if err != nil {
		t.Fatal(err)
	}
	addBatch(t, ctx, s, mem, paySchema, 0, 0, 10, 10)
	addBatch(t, ctx, s, mem, paySchema, 1, 10, 20, 10)
	rec := makeRecord(t, mem, paySchema, 20, 30)
	defer rec.Release()
	err = s.AddBatch(ctx, 4, paySchema, []arrow.RecordBatch{rec})
	if !errors.Is(err, ErrMissingBatches) || !strings.Contains(err.Error(), "batches 2 to 3") {
		t.Fatalf("AddBatch(4) after 1: %v", err)
	}
	if v, err := Version(ctx, table); err != nil || v != 1 {
		t.Fatalf("after the refused batch: version %d, %v", v, err)
	}
	files, _ := Committed(ctx, table)
	if len(files) != 2 {
		t.Fatalf("%d files, want the 2 of batches 0 and 1", len(files))
	}
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
