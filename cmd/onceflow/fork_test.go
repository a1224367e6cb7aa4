package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/storage"
)

var forkSchema = arrow.NewSchema([]arrow.Field{{Name: "i", Type: arrow.PrimitiveTypes.Int64}}, nil)

// upTo emits 0 … n-1, 10 rows a batch.
type upTo struct{ n int64 }

func (u upTo) Schema() *arrow.Schema { return forkSchema }
func (u upTo) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (u upTo) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	s, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(strconv.FormatInt(min(s+10, u.n), 10)), nil
}
func (u upTo) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.ParseInt(string(start), 10, 64)
	b, _ := strconv.ParseInt(string(end), 10, 64)
	bld := array.NewInt64Builder(memory.DefaultAllocator)
	defer bld.Release()
	for i := a; i < b; i++ {
		bld.Append(i)
	}
	col := bld.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(forkSchema, []arrow.Array{col}, b-a)
	defer rec.Release()
	return emit(rec)
}

func TestCheckpointFork(t *testing.T) {
	ctx := context.Background()
	srcDir, dstDir := t.TempDir(), t.TempDir()+"/fork"
	run := func(dir string, sink *memsink.Sink) {
		t.Helper()
		st, err := storage.OpenLocal(dir, storage.LocalOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q, err := engine.NewQuery(engine.ReadStream(upTo{n: 40}), engine.WithCheckpoint(st), engine.WithSink(sink), engine.WithTrigger(engine.AvailableNow()))
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Run(ctx); err != nil {
			t.Fatal(err)
		}
	}
	run(srcDir, memsink.New("first"))

	code, out, errOut := runCLI(ctx, "checkpoint", "fork", srcDir, dstDir, "--from-batch", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "at batch 2 into file://") || !strings.Contains(out, "runs batch 2 next") || !strings.Contains(out, "log entries") {
		t.Fatalf("output:\n%s", out)
	}
	replay := memsink.New("replay")
	run(dstDir, replay)
	if got := replay.BatchIDs(); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("replayed batches %v, want [2 3]", got)
	}

	for _, tc := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{srcDir, t.TempDir()}, true, "checkpoint fork SRC DST --from-batch N"},
		{[]string{srcDir, "--from-batch", "2"}, true, "checkpoint fork SRC DST --from-batch N"},
		{[]string{srcDir, t.TempDir(), "--from-batch", "x"}, true, "invalid value"},
		{[]string{srcDir, t.TempDir(), "--from-batch", "9"}, false, "batch 8 is not committed yet"},
		{[]string{srcDir, dstDir, "--from-batch", "1"}, false, "is not empty"},
	} {
		code, _, errOut := runCLI(ctx, append([]string{"checkpoint", "fork"}, tc.args...)...)
		if want := map[bool]int{true: 2, false: 1}[tc.usage]; code != want || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %s; want %d containing %q", tc.args, code, errOut, want, tc.want)
		}
	}
}
