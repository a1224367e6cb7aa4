package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/storage"
)

// remind registers an event-time timer a minute after each key's rows.
type remind struct{ n *engine.ValueState[int64] }

func (p *remind) Init(s *engine.ProcessorSpec) error {
	s.Output(struct{ Key string }{})
	p.n = engine.NewValueState[int64](s, "n")
	return nil
}

func (p *remind) Handle(k *engine.KeyContext, rows *engine.Rows) error {
	n, _ := p.n.Get(k)
	p.n.Set(k, n+int64(rows.Len()))
	k.RegisterTimer(engine.EventTime, time.UnixMilli(3_600_000))
	return nil
}

func (p *remind) OnTimer(*engine.KeyContext, engine.Timer) error { return nil }

// oneBatch serves one record.
type oneBatch struct{ rec arrow.RecordBatch }

func (s oneBatch) Schema() *arrow.Schema { return s.rec.Schema() }
func (s oneBatch) Description() string   { return "one" }
func (s oneBatch) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (s oneBatch) LatestOffset(context.Context, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage("1"), nil
}
func (s oneBatch) Read(_ context.Context, start, _ json.RawMessage, emit func(arrow.RecordBatch) error) error {
	if string(start) == "1" {
		return nil
	}
	return emit(s.rec)
}

// TestStateListsProcessorTimers: a processor's timers are the store
// "timers" of its operator, which checkpoint state lists.
func TestStateListsProcessorTimers(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "key", Type: arrow.BinaryTypes.String}, {Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_ms}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"a", "b", "a"}, nil)
	b.Field(1).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1000, 2000, 3000}, nil)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	dir := t.TempDir()
	cp, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := engine.NewQuery(engine.ReadStream(oneBatch{rec}).WithWatermark("ts", 0).GroupBy("key").ID("remind").Process(&remind{}),
		engine.WithCheckpoint(cp), engine.WithSink(memsink.New("x")), engine.WithTrigger(engine.AvailableNow()), engine.WithStatePartitions(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(ctx, "checkpoint", "state", dir, "--operator", "remind", "--store", "timers", "-o", "jsonl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(out, `"_timer_ms":`+strconv.Itoa(3_600_000)) || !strings.Contains(out, `"_timer_kind":1`) {
		t.Fatalf("timers listed:\n%s", out)
	}
}
