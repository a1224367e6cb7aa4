package engine

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

	"github.com/onceflow/onceflow/memsink"
)

var nullTSSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
}, nil)

// nullTSSource replays script batches of (key, seconds); a negative
// second is a null event time.
type nullTSSource struct{ batches [][]evRow }

func (s *nullTSSource) Schema() *arrow.Schema { return nullTSSchema }
func (s *nullTSSource) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (s *nullTSSource) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	k, _ := strconv.Atoi(string(start))
	return json.RawMessage(strconv.Itoa(min(k+1, len(s.batches)))), nil
}
func (s *nullTSSource) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.Atoi(string(start))
	b, _ := strconv.Atoi(string(end))
	mem := memory.DefaultAllocator
	kb := array.NewStringBuilder(mem)
	tb := array.NewTimestampBuilder(mem, nullTSSchema.Field(1).Type.(*arrow.TimestampType))
	defer kb.Release()
	defer tb.Release()
	n := 0
	for _, bt := range s.batches[a:b] {
		for _, r := range bt {
			kb.Append(r.key)
			if r.sec < 0 {
				tb.AppendNull()
			} else {
				tb.Append(arrow.Timestamp(r.sec * 1e6))
			}
			n++
		}
	}
	cols := []arrow.Array{kb.NewArray(), tb.NewArray()}
	rec := array.NewRecordBatch(nullTSSchema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	return emit(rec)
}

// Regression: a row with a null event time before a deduplication was kept,
// then evicted as expired in the same batch, and the state commit refused
// the key, stopping the query for good; now the query goes on (or fails
// with an error about the null input, never about state keys).
//
// Before the fix: a row whose event time is null, under a watermark, before a
// deduplication. The row is not late (null is kept), so its key is
// changed in the batch; eviction then reads the null time as 0, finds the
// key expired, and removes it in the same batch: statestore Commit gets the
// key in both upserts and deletes and refuses. One payment without a
// timestamp stops the query for good (a re-run is identical), with an
// error about state keys rather than about the input.
func TestDedupRowWithNullEventTimeDoesNotStopTheQuery(t *testing.T) {
	script := [][]evRow{{{"a", 100, 0}}, {{"b", -1, 0}}, {{"c", 200, 0}}}
	for _, tc := range []struct {
		name   string
		stream func() *Stream
	}{
		{"within watermark", func() *Stream {
			return ReadStream(&nullTSSource{batches: script}).WithWatermark("ts", 5*time.Second).DropDuplicatesWithinWatermark("key").Stream
		}},
		{"time among the keys", func() *Stream {
			return ReadStream(&nullTSSource{batches: script}).WithWatermark("ts", 5*time.Second).DropDuplicates("key", "ts").Stream
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := memsink.New("out")
			_, err := runQuery(t, tc.stream(), WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(1))
			if err != nil && !strings.Contains(err.Error(), "null") {
				t.Fatalf("one row with a null event time stopped the query: %v", err)
			}
			if err != nil && strings.Contains(err.Error(), "appears in upserts and again in deletes") {
				t.Fatalf("one row with a null event time stopped the query on a state commit: %v", err)
			}
			if err == nil && len(sink.All()) < 2 {
				t.Fatalf("output %v", sink.All())
			}
		})
	}
}
