package statictable_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/source/files"
	"github.com/onceflow/onceflow/statictable"
	"github.com/onceflow/onceflow/storage"
)

// lakeWriter appends batches of (key, val) rows to a files-sink table.
type lakeWriter struct {
	t    *testing.T
	sink *filesink.Sink
	next int64
}

func newLake(t *testing.T, table storage.Store, opts ...filesink.Option) *lakeWriter {
	t.Helper()
	s, err := filesink.New(table, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background(), "lake-writer"); err != nil {
		t.Fatal(err)
	}
	return &lakeWriter{t: t, sink: s}
}

// add commits the next batch with rows (key, val); a key "" is null.
func (w *lakeWriter) add(rows ...[2]string) {
	w.t.Helper()
	kb, vb := array.NewStringBuilder(memory.DefaultAllocator), array.NewStringBuilder(memory.DefaultAllocator)
	defer kb.Release()
	defer vb.Release()
	for _, r := range rows {
		if r[0] == "" {
			kb.AppendNull()
		} else {
			kb.Append(r[0])
		}
		vb.Append(r[1])
	}
	cols := []arrow.Array{kb.NewArray(), vb.NewArray()}
	defer cols[0].Release()
	defer cols[1].Release()
	rec := array.NewRecordBatch(tableSchema, cols, int64(len(rows)))
	defer rec.Release()
	if err := w.sink.AddBatch(context.Background(), w.next, tableSchema, []arrow.RecordBatch{rec}); err != nil {
		w.t.Fatal(err)
	}
	w.next++
}

// TestLakeJoinReplaysTheRecordedVersion joins a stream with a lake table
// that gains a batch (key "a", val "a<n>") before every sink call and is
// compacted every 2 batches: batch k joins the lake at the newest batch
// when it was planned, and the re-run of the failed batch 2 joins the
// version its first attempt recorded, not the one appended since.
func TestLakeJoinReplaysTheRecordedVersion(t *testing.T) {
	table := localStore(t)
	w := newLake(t, table, filesink.WithCompactEvery(2))
	w.add([2]string{"a", "a0"}, [2]string{"b", "b0"}, [2]string{"", "null"})
	lake, err := statictable.NewLake(context.Background(), table)
	if err != nil {
		t.Fatal(err)
	}
	if !lake.Schema().Equal(tableSchema) {
		t.Fatalf("schema %s, want %s", lake.Schema(), tableSchema)
	}
	src := &keySource{batches: [][]string{{"a", "x"}, {"a", "a"}, {"a"}, {"x", "a"}, {"a"}}}
	sink := &changingSink{Sink: memsink.New("out"), failAt: 2, change: func(int64) {
		w.add([2]string{"a", fmt.Sprint("a", w.next)})
	}}
	runWithReplay(t, src, lake, sink)
	// Batch k is planned once the sink took batches < k: lake batch k,
	// plus one for the failed attempt of batch 2 from batch 3 on.
	for k := range src.batches {
		v := k
		if k >= 3 {
			v++
		}
		vals := []string{"a0"}
		for i := 1; i <= v; i++ {
			vals = append(vals, fmt.Sprint("a", i))
		}
		if got, want := joined(sink.Sink, int64(k)), want(src, k, vals); !slices.Equal(got, want) {
			t.Errorf("batch %d (lake batch %d): got %v, want %v", k, v, got, want)
		}
	}
}

// TestLakeVersionGone reads a recorded lake version after compaction
// purged its log objects, and after a file it lists was deleted (as
// Vacuum deletes files a later batch removed): both fail with
// ErrVersionGone naming the table and the batch.
func TestLakeVersionGone(t *testing.T) {
	ctx := context.Background()
	t.Run("compacted", func(t *testing.T) {
		table := localStore(t)
		w := newLake(t, table, filesink.WithCompactEvery(2))
		w.add([2]string{"a", "a0"})
		lake, err := statictable.NewLake(ctx, table)
		if err != nil {
			t.Fatal(err)
		}
		v0, err := lake.LatestVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w.add([2]string{"a", "a1"})
		if err := lake.ReadVersion(ctx, v0, func(arrow.RecordBatch) error { return nil }); err != nil {
			t.Fatalf("version 0 before compaction: %v", err)
		}
		for range 8 {
			w.add([2]string{"a", "more"})
		}
		err = lake.ReadVersion(ctx, v0, func(arrow.RecordBatch) error { return nil })
		if !errors.Is(err, statictable.ErrVersionGone) || !errors.Is(err, filesink.ErrVersionGone) || !strings.Contains(err.Error(), "lake[") || !strings.Contains(err.Error(), "at batch 0") {
			t.Fatalf("want ErrVersionGone naming the table and batch 0, got %v", err)
		}
		t.Log(err)
	})
	t.Run("vacuumed", func(t *testing.T) {
		table := localStore(t)
		w := newLake(t, table)
		w.add([2]string{"a", "a0"})
		lake, err := statictable.NewLake(ctx, table)
		if err != nil {
			t.Fatal(err)
		}
		v0, err := lake.LatestVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		files, err := filesink.Committed(ctx, table)
		if err != nil || len(files) != 1 {
			t.Fatalf("committed files %v, %v", files, err)
		}
		if err := table.Delete(ctx, files[0].Path); err != nil {
			t.Fatal(err)
		}
		err = lake.ReadVersion(ctx, v0, func(arrow.RecordBatch) error { return nil })
		if !errors.Is(err, statictable.ErrVersionGone) || !strings.Contains(err.Error(), "at batch 0") || !strings.Contains(err.Error(), files[0].Path) {
			t.Fatalf("want ErrVersionGone naming batch 0 and the file, got %v", err)
		}
		t.Log(err)
	})
	t.Run("digest", func(t *testing.T) {
		table := localStore(t)
		w := newLake(t, table)
		w.add([2]string{"a", "a0"})
		lake, err := statictable.NewLake(ctx, table)
		if err != nil {
			t.Fatal(err)
		}
		v0, err := lake.LatestVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(v0, &v); err != nil {
			t.Fatal(err)
		}
		v["files"] = 2
		bad, _ := json.Marshal(v)
		err = lake.ReadVersion(ctx, bad, func(arrow.RecordBatch) error { return nil })
		if !errors.Is(err, statictable.ErrVersionChanged) {
			t.Fatalf("want ErrVersionChanged, got %v", err)
		}
	})
}

// TestPlanShowsBroadcastSize checks that Query.Describe shows the size of
// each table at its newest version.
func TestPlanShowsBroadcastSize(t *testing.T) {
	ctx := context.Background()
	table := localStore(t)
	w := newLake(t, table)
	w.add([2]string{"a", "a0"}, [2]string{"b", "b0"})
	w.add([2]string{"c", "c0"})
	lake, err := statictable.NewLake(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, dir, "t.json", `{"key":"a","val":"x"}`+"\n")
	d, err := statictable.NewDir(dir, files.JSON, tableSchema)
	if err != nil {
		t.Fatal(err)
	}
	src := &keySource{batches: [][]string{{"a"}}}
	stream := src.stream().JoinStatic(lake, engine.Inner, engine.EveryBatch, engine.On("key", "key")).ID("lake").
		Select(batch.As(batch.Col("left_key"), "k"), batch.As(batch.Col("id"), "id")).JoinStatic(d, engine.LeftOuter, engine.Pinned, engine.On("k", "key")).ID("dir")
	q, err := engine.NewQuery(stream, engine.WithCheckpoint(localStore(t)), engine.WithSink(memsink.New("out")))
	if err != nil {
		t.Fatal(err)
	}
	p, err := q.Describe()
	if err != nil {
		t.Fatal(err)
	}
	s := p.String()
	for _, want := range []string{"broadcasts lake[", ": 2 files, 3 rows, ", "broadcasts files[" + dir, ": 1 files, rows unknown until read, 22 bytes"} {
		if !strings.Contains(s, want) {
			t.Errorf("plan lacks %q:\n%s", want, s)
		}
	}
	t.Log(s)
}
