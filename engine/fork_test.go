package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/source/files"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

func forkStream(avail int64) *Stream {
	return ReadStream(newSeq(avail, 10, 5)).GroupBy("key").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
}

func listNames(t *testing.T, st storage.Store) []string {
	t.Helper()
	infos, err := st.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range infos {
		out = append(out, in.Name)
	}
	return out
}

func TestForkReplaysFromBatch(t *testing.T) {
	ctx := context.Background()
	src := localStore(t)
	orig := memsink.New("orig")
	opts := []Option{WithCheckpoint(src), WithTrigger(AvailableNow()), WithStatePartitions(2), WithSnapshotEvery(2), WithName("totals")}
	if _, err := runQuery(t, forkStream(70), append(opts, WithSink(orig))...); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(orig.BatchIDs()); got != "[0 1 2 3 4 5 6]" {
		t.Fatalf("original batches %s", got)
	}
	before := listNames(t, src)

	dst := localStore(t)
	stats, err := forkCheckpoint(ctx, src, dst, 4, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if stats.StateFiles == 0 || stats.LogEntries != 3*4 {
		t.Fatalf("stats %+v: want state files and 4 entries each of offsets, commits, progress", stats)
	}
	if after := listNames(t, src); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("fork changed the source checkpoint:\n%v\n%v", before, after)
	}
	// Only the state version 3 needs: with a snapshot every 2 versions,
	// the snapshot of 2 (or 3) and the deltas after it.
	for _, n := range listNames(t, dst) {
		if strings.HasPrefix(n, "state/") && (strings.Contains(n, "00000000000000000004.") || strings.Contains(n, "00000000000000000000.delta")) {
			t.Errorf("fork copied %s, which version 3 does not need", n)
		}
	}
	sm, err := ReadMetadata(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	dm, err := ReadMetadata(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	ff, ok, err := ReadForkedFrom(ctx, dst)
	if err != nil || !ok {
		t.Fatalf("ReadForkedFrom: %v %v", ok, err)
	}
	if dm.ID == sm.ID || ff.QueryID != sm.ID || ff.Batch != 4 || ff.Name != "totals" || !strings.Contains(dm.Name, "fork of file://") || !strings.Contains(dm.Name, "at batch 4") {
		t.Fatalf("fork metadata %+v from %+v", dm, ff)
	}
	if _, ok, _ := ReadForkedFrom(ctx, src); ok {
		t.Fatal("the source reads as a fork")
	}

	// The fork re-processes batches 4.. into a new sink, with the same
	// state: each replayed batch equals the original.
	replay := memsink.New("replay")
	q, err := runQuery(t, forkStream(70), WithCheckpoint(dst), WithTrigger(AvailableNow()), WithStatePartitions(2), WithSink(replay))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(replay.BatchIDs()); got != "[4 5 6]" {
		t.Fatalf("replayed batches %s, want [4 5 6]", got)
	}
	for _, id := range []int64{4, 5, 6} {
		if g, w := fmt.Sprint(replay.Batch(id)), fmt.Sprint(orig.Batch(id)); g != w {
			t.Errorf("batch %d replayed as\n%s\nfirst run\n%s", id, g, w)
		}
	}
	if p := q.LastProgress(); p == nil || p.ID != dm.ID || p.Recovered {
		t.Fatalf("fork progress %+v", p)
	}
}

func TestForkRefuses(t *testing.T) {
	ctx := context.Background()
	build := func(t *testing.T, opts ...Option) storage.Store {
		cp := localStore(t)
		all := append([]Option{WithCheckpoint(cp), WithTrigger(AvailableNow()), WithStatePartitions(2), WithSink(memsink.New("o"))}, opts...)
		if _, err := runQuery(t, forkStream(50), all...); err != nil {
			t.Fatal(err)
		}
		return cp
	}
	cases := []struct {
		name  string
		src   func(t *testing.T) storage.Store
		dst   func(t *testing.T) storage.Store
		from  int64
		want  string
		dirty bool // dst keeps what was there
	}{
		{name: "batch zero", src: func(t *testing.T) storage.Store { return build(t) }, from: 0, want: "must be 1 or more"},
		{name: "not committed yet", src: func(t *testing.T) storage.Store { return build(t) }, from: 9, want: "batch 8 is not committed yet: the newest committed batch is 4"},
		{name: "purged", src: func(t *testing.T) storage.Store { return build(t, WithMinBatchesToRetain(2)) }, from: 2, want: "batch 1 was purged: the checkpoint keeps batches 3 to 4"},
		{name: "planned not committed", src: func(t *testing.T) storage.Store {
			cp := localStore(t)
			_, err := runQuery(t, forkStream(50), WithCheckpoint(cp), WithTrigger(AvailableNow()), WithSink(&failingSink{Sink: memsink.New("o"), failAt: 2}))
			if err == nil {
				t.Fatal("want the injected failure")
			}
			return cp
		}, from: 3, want: "batch 2 is planned but not committed (the newest committed batch is 1)"},
		{name: "state purged", src: func(t *testing.T) storage.Store {
			cp := build(t)
			// Every file version 2 could load from: a delta that holds the
			// whole state (format 2) would otherwise stand in for the rest.
			// The deltas of every partition are bundled (format 3), so
			// every partition loses them.
			files, err := cp.List(ctx, "state/totals/")
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if v, _, ok := statestore.ParseFileName(path.Base(f.Name)); ok && v <= 2 {
					if err := cp.Delete(ctx, f.Name); err != nil {
						t.Fatal(err)
					}
				}
			}
			return cp
		}, from: 3, want: `state state/totals/0 at version 2: cannot be loaded, its files were purged or never written`},
		{name: "destination not empty", src: func(t *testing.T) storage.Store { return build(t) }, dst: func(t *testing.T) storage.Store {
			d := localStore(t)
			if err := d.Put(ctx, "something", []byte("x")); err != nil {
				t.Fatal(err)
			}
			return d
		}, from: 2, want: "is not empty (something", dirty: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src(t)
			dst := localStore(t)
			if tc.dst != nil {
				dst = tc.dst(t)
			}
			_, err := ForkCheckpoint(ctx, src, dst, tc.from)
			if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidQuery containing %q", err, tc.want)
			}
			if n := listNames(t, dst); !tc.dirty && len(n) != 0 {
				t.Fatalf("refused fork wrote %v", n)
			}
		})
	}
}

// An interrupted fork (everything but its last file) is refused by the
// engine rather than run from the wrong place.
func TestInterruptedForkIsRefused(t *testing.T) {
	ctx := context.Background()
	src := localStore(t)
	if _, err := runQuery(t, forkStream(50), WithCheckpoint(src), WithTrigger(AvailableNow()), WithSink(memsink.New("o"))); err != nil {
		t.Fatal(err)
	}
	for _, from := range []int64{1, 3} {
		dst := localStore(t)
		if _, err := ForkCheckpoint(ctx, src, dst, from); err != nil {
			t.Fatal(err)
		}
		if err := dst.Delete(ctx, offsetlog.FileName(checkpoint.OffsetsDir, from-1)); err != nil {
			t.Fatal(err)
		}
		sink := memsink.New("x")
		_, err := runQuery(t, forkStream(50), WithCheckpoint(dst), WithTrigger(AvailableNow()), WithSink(sink))
		if !errors.Is(err, offsetlog.ErrCorrupt) || len(sink.BatchIDs()) != 0 {
			t.Fatalf("from %d: run on an interrupted fork: %v, batches %v", from, err, sink.BatchIDs())
		}
	}
}

// A files source's own log is forked with the checkpoint: the replay takes
// exactly the files the original batches took, even with more files
// landed since.
func TestForkReplaysTheSameFiles(t *testing.T) {
	ctx := context.Background()
	land := t.TempDir()
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	write := func(i int) {
		name := filepath.Join(land, fmt.Sprintf("f%02d.json", i))
		if err := os.WriteFile(name, []byte(fmt.Sprintf("{\"v\":%d}\n{\"v\":%d}\n", i, i*10)), 0o644); err != nil {
			t.Fatal(err)
		}
		// Distinct modification times keep the files' order by name.
		mt := time.Date(2026, 1, 1, 0, i, 0, 0, time.UTC)
		if err := os.Chtimes(name, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	newSrc := func() *files.Source {
		s, err := files.New(land, files.JSON, schema, files.WithMaxFilesPerTrigger(1))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for i := range 4 {
		write(i)
	}
	src := localStore(t)
	orig := memsink.New("orig")
	if _, err := runQuery(t, ReadStream(newSrc()), WithCheckpoint(src), WithSink(orig), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(orig.BatchIDs()); got != "[0 1 2 3]" {
		t.Fatalf("original batches %s", got)
	}
	dst := localStore(t)
	if _, err := ForkCheckpoint(ctx, src, dst, 2); err != nil {
		t.Fatal(err)
	}
	write(4) // landed after the original run
	replay := memsink.New("replay")
	if _, err := runQuery(t, ReadStream(newSrc()), WithCheckpoint(dst), WithSink(replay), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(replay.BatchIDs()); got != "[2 3 4]" {
		t.Fatalf("replayed batches %s, want [2 3 4]", got)
	}
	for _, id := range []int64{2, 3} {
		if g, w := fmt.Sprint(replay.Batch(id)), fmt.Sprint(orig.Batch(id)); g != w {
			t.Errorf("batch %d replayed as %s, first run %s", id, g, w)
		}
	}
	if got := fmt.Sprint(replay.Batch(4)); got != "[[4] [40]]" {
		t.Errorf("batch 4 (the new file) = %s", got)
	}
}
