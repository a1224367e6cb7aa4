package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/memsink"
)

// rowScript replays fixed batches of rows of any schema: offset k is "the
// first k script batches", one script batch per trigger. A row is one Go
// value per column (nil for null); timestamps are given in Unix ms.
type rowScript struct {
	schema  *arrow.Schema
	batches [][][]any
}

func (s *rowScript) Schema() *arrow.Schema { return s.schema }
func (s *rowScript) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (s *rowScript) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	k, _ := strconv.Atoi(string(start))
	return json.RawMessage(strconv.Itoa(min(k+1, len(s.batches)))), nil
}
func (s *rowScript) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.Atoi(string(start))
	b, _ := strconv.Atoi(string(end))
	rb := array.NewRecordBuilder(memory.DefaultAllocator, s.schema)
	defer rb.Release()
	for _, bt := range s.batches[a:b] {
		for _, row := range bt {
			for c, v := range row {
				f := rb.Field(c)
				if v == nil {
					f.AppendNull()
					continue
				}
				switch fb := f.(type) {
				case *array.TimestampBuilder:
					fb.Append(arrow.Timestamp(v.(int64)))
				case *array.Int64Builder:
					fb.Append(v.(int64))
				case *array.Uint64Builder:
					fb.Append(v.(uint64))
				case *array.Float64Builder:
					fb.Append(v.(float64))
				case *array.StringBuilder:
					fb.Append(v.(string))
				default:
					return fmt.Errorf("rowScript: column %d is %T", c, f)
				}
			}
		}
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	return emit(rec)
}

var msTS = &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}

// runScript runs stream to the end of its script, one batch per trigger,
// and returns the rows of every batch (in sink order) rendered with %v.
func runScript(t *testing.T, stream *Stream, opts ...Option) map[int64][]string {
	t.Helper()
	sink := memsink.New("out")
	opts = append([]Option{WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow())}, opts...)
	if _, err := runQuery(t, stream, opts...); err != nil {
		t.Fatal(err)
	}
	out := map[int64][]string{}
	for _, id := range sink.BatchIDs() {
		for _, r := range sink.Batch(id) {
			out[id] = append(out[id], fmt.Sprint(r...))
		}
	}
	return out
}

// Regression: Top ranked a uint64 column through int64, so values of 2^63
// and more ranked below small ones; now unsigned values rank as unsigned.
func TestTopRanksLargeUnsigned(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "ts", Type: msTS}, {Name: "v", Type: arrow.PrimitiveTypes.Uint64}}, nil)
	src := &rowScript{schema: schema, batches: [][][]any{
		{{int64(1000), uint64(1)}, {int64(1000), uint64(1) << 63}, {int64(1000), uint64(7)}},
		{{int64(60000), uint64(1)}},
	}}
	got := runScript(t, ReadStream(src).WithWatermark("ts", 0).GroupBy("ts").ID("best").Top(1, "v", Desc))
	var rows []string
	for _, rs := range got {
		rows = append(rows, rs...)
	}
	// memsink renders a uint64 as the int64 of its bits.
	if want := fmt.Sprint(time.UnixMilli(1000).UTC(), " ", int64(math.MinInt64)); len(rows) != 1 || rows[0] != want {
		t.Fatalf("top 1 desc: %q, want [%q]", rows, want)
	}
}

// Regression: Top's ranking treated NaN as tied with every value, which is
// no ordering: with 3, NaN, 5 all three were kept as top 1. Now NaN ranks
// above every number (as in Spark), so it alone is the top 1 in Desc
// order, and 3 alone in Asc order.
func TestTopRanksNaN(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "ts", Type: msTS}, {Name: "v", Type: arrow.PrimitiveTypes.Float64}}, nil)
	for _, tc := range []struct {
		order Order
		want  float64
	}{{Desc, math.NaN()}, {Asc, 3}} {
		src := &rowScript{schema: schema, batches: [][][]any{
			{{int64(1000), 3.0}, {int64(1000), math.NaN()}, {int64(1000), 5.0}, {int64(1000), nil}},
			{{int64(60000), 1.0}},
		}}
		got := runScript(t, ReadStream(src).WithWatermark("ts", 0).GroupBy("ts").ID("best").Top(1, "v", tc.order))
		var rows []string
		for _, rs := range got {
			rows = append(rows, rs...)
		}
		if want := fmt.Sprint(time.UnixMilli(1000).UTC(), " ", tc.want); len(rows) != 1 || rows[0] != want {
			t.Fatalf("top 1 %s: %q, want [%q]", tc.order, rows, want)
		}
	}
}
