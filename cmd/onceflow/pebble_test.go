package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/statestore/pebblestore"
	"github.com/onceflow/onceflow/storage"
)

// fixedSource emits one record, as one batch: offsets 0 and 1.
type fixedSource struct{ rec arrow.RecordBatch }

var fixedSchema = arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)

func (s fixedSource) Schema() *arrow.Schema { return fixedSchema }
func (s fixedSource) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage(`0`), nil
}
func (s fixedSource) LatestOffset(context.Context, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`1`), nil
}
func (s fixedSource) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	if string(start) == "0" && string(end) == "1" {
		return emit(s.rec)
	}
	return nil
}

// TestStateDumpAndInspectOnPebble: `checkpoint state` and `checkpoint
// inspect` read a checkpoint whose state the pebble backend keeps, and
// inspect names the backend.
func TestStateDumpAndInspectOnPebble(t *testing.T) {
	dir := t.TempDir()
	cp, err := storage.OpenLocal(dir, storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := pebblestore.NewBackend(pebblestore.BackendOptions{Dir: t.TempDir(), CacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mem := memory.DefaultAllocator
	kb := array.NewInt64Builder(mem)
	kb.AppendValues([]int64{3, 1, 3, 2, 3}, nil)
	col := kb.NewArray()
	kb.Release()
	rec := array.NewRecordBatch(fixedSchema, []arrow.Array{col}, 5)
	col.Release()
	defer rec.Release()
	src := fixedSource{rec: rec}
	q, err := engine.NewQuery(engine.ReadStream(src).GroupBy("k").ID("counts").Agg(batch.CountRows().As("n")),
		engine.WithCheckpoint(cp), engine.WithSink(memsink.New("out")), engine.WithTrigger(engine.AvailableNow()),
		engine.WithStatePartitions(2), engine.WithStateStore(b))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(ctx, "checkpoint", "state", "-o", "jsonl", "--operator", "counts", dir)
	if code != 0 {
		t.Fatalf("state: exit %d: %s", code, errOut)
	}
	for _, want := range []string{`"k":1,"n":1`, `"k":2,"n":1`, `"k":3,"n":3`} {
		if !strings.Contains(out, want) {
			t.Errorf("state dump lacks %s:\n%s", want, out)
		}
	}
	code, out, errOut = runCLI(ctx, "checkpoint", "inspect", dir)
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "counts") || !strings.Contains(out, "backend pebble") {
		t.Fatalf("inspect does not list the operator with its backend:\n%s", out)
	}
}
