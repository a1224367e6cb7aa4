package statictable_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/storage"
)

// keySource is a stream whose offset k is the number of batches read; batch
// k holds rows (key, id).
type keySource struct{ batches [][]string }

var streamSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// tableSchema is the schema of every static table of the tests.
var tableSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "val", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func (s *keySource) Schema() *arrow.Schema { return streamSchema }
func (s *keySource) Description() string   { return "keys" }
func (s *keySource) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (s *keySource) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	k, _ := strconv.Atoi(string(start))
	return json.RawMessage(strconv.Itoa(min(k+1, len(s.batches)))), nil
}
func (s *keySource) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.Atoi(string(start))
	b, _ := strconv.Atoi(string(end))
	kb, ib := array.NewStringBuilder(memory.DefaultAllocator), array.NewInt64Builder(memory.DefaultAllocator)
	defer kb.Release()
	defer ib.Release()
	for k := a; k < b; k++ {
		for i, key := range s.batches[k] {
			kb.Append(key)
			ib.Append(int64(k*100 + i))
		}
	}
	cols := []arrow.Array{kb.NewArray(), ib.NewArray()}
	defer cols[0].Release()
	defer cols[1].Release()
	rec := array.NewRecordBatch(streamSchema, cols, int64(cols[0].Len()))
	defer rec.Release()
	return emit(rec)
}

// changingSink calls change before each AddBatch (so that the next batch
// is planned against a new table version) and fails batch failAt once,
// after the change.
type changingSink struct {
	*memsink.Sink
	change func(id int64)
	failAt int64
	mu     sync.Mutex
	failed bool
}

func (s *changingSink) AddBatch(ctx context.Context, id int64, sc *arrow.Schema, r []arrow.RecordBatch) error {
	s.change(id)
	s.mu.Lock()
	fail := id == s.failAt && !s.failed
	s.failed = s.failed || fail
	s.mu.Unlock()
	if fail {
		return fmt.Errorf("injected sink failure")
	}
	return s.Sink.AddBatch(ctx, id, sc, r)
}

func localStore(t *testing.T) storage.Store {
	t.Helper()
	s, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func run(t *testing.T, stream *engine.Stream, opts ...engine.Option) error {
	t.Helper()
	q, err := engine.NewQuery(stream, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return q.Run(ctx)
}

// runWithReplay runs the inner join of src with table twice on one
// checkpoint: the first run fails at batch sink.failAt, the second
// re-runs that batch and finishes.
func runWithReplay(t *testing.T, src *keySource, table engine.StaticTable, sink *changingSink) {
	t.Helper()
	cp := localStore(t)
	stream := src.stream().JoinStatic(table, engine.Inner, engine.EveryBatch, engine.On("key", "key")).ID("st")
	opts := []engine.Option{engine.WithCheckpoint(cp), engine.WithSink(sink), engine.WithTrigger(engine.AvailableNow())}
	if err := run(t, stream, opts...); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("want the injected failure, got %v", err)
	}
	if err := run(t, stream, opts...); err != nil {
		t.Fatal(err)
	}
}

func (s *keySource) stream() *engine.Stream { return engine.ReadStream(s) }

// joined returns batch id of sink as sorted "key id val" lines.
func joined(sink *memsink.Sink, id int64) []string {
	var out []string
	for _, r := range sink.Batch(id) {
		out = append(out, fmt.Sprintf("%v %v %v", r[0], r[1], r[3]))
	}
	slices.Sort(out)
	return out
}

// want is the inner join of the stream's batch k with vals matching key
// "a" (the stream's other keys match nothing).
func want(src *keySource, k int, vals []string) []string {
	var out []string
	for i, key := range src.batches[k] {
		if key != "a" {
			continue
		}
		for _, v := range vals {
			out = append(out, fmt.Sprintf("a %d %s", k*100+i, v))
		}
	}
	slices.Sort(out)
	return out
}
