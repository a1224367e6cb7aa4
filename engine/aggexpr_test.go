package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/memsink"
)

// orderRow is a row of orderSource: an order line with a price and a
// quantity, either of which may be null.
type orderRow struct {
	key        string
	sec        int64 // event time, seconds
	price, qty *int64
}

func n64(v int64) *int64 { return &v }

var orderSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "price", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "qty", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// orderSource replays script batches, one per trigger, up to avail of
// them (0: all).
type orderSource struct {
	batches [][]orderRow
	avail   int
}

func (s *orderSource) Schema() *arrow.Schema { return orderSchema }
func (s *orderSource) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (s *orderSource) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	k, _ := strconv.Atoi(string(start))
	avail := len(s.batches)
	if s.avail > 0 {
		avail = s.avail
	}
	return json.RawMessage(strconv.Itoa(min(k+1, avail))), nil
}
func (s *orderSource) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.Atoi(string(start))
	b, _ := strconv.Atoi(string(end))
	rb := array.NewRecordBuilder(memory.DefaultAllocator, orderSchema)
	defer rb.Release()
	for _, bt := range s.batches[a:b] {
		for _, r := range bt {
			rb.Field(0).(*array.StringBuilder).Append(r.key)
			rb.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(r.sec * 1e6))
			for i, v := range []*int64{r.price, r.qty} {
				if v == nil {
					rb.Field(2 + i).AppendNull()
				} else {
					rb.Field(2 + i).(*array.Int64Builder).Append(*v)
				}
			}
		}
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	return emit(rec)
}

// orders: a@2 and b@4 have a null product (a null quantity, a null
// price); b@4 is late once the watermark (delay 5 s) has passed 7 s.
var orders = [][]orderRow{
	{{"a", 1, n64(3), n64(2)}, {"a", 2, n64(5), nil}, {"b", 3, n64(10), n64(1)}, {"a", 12, n64(1), n64(4)}},
	{{"b", 4, nil, n64(7)}, {"a", 14, n64(2), n64(3)}, {"c", 25, n64(4), n64(4)}},
	{{"a", 40, n64(1), n64(1)}},
}

func revenue() batch.Expr { return batch.Mul(batch.Col("price"), batch.Col("qty")) }

// rowStrings renders rows as sorted space-separated values, times in
// Unix seconds.
func rowStrings(rows [][]any) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		f := make([]string, len(r))
		for i, v := range r {
			if tm, ok := v.(time.Time); ok {
				v = tm.Unix()
			}
			f[i] = fmt.Sprint(v)
		}
		out = append(out, strings.Join(f, " "))
	}
	slices.Sort(out)
	return out
}

func sinkBatches(s *memsink.Sink) map[int64][]string {
	got := map[int64][]string{}
	for _, id := range s.BatchIDs() {
		if rows := s.Batch(id); len(rows) > 0 {
			got[id] = rowStrings(rows)
		}
	}
	return got
}

// Aggregates over expressions in a group-by, with nulls in the
// expression's input: the null products are skipped, the per-batch sum of
// a batch of nulls only is null, and the default name is the expression's.
func TestAggregateOverExpressionGroupBy(t *testing.T) {
	sink := memsink.New("out")
	stream := ReadStream(&orderSource{batches: orders}).GroupBy("key").Agg(
		batch.Sum(revenue()).As("revenue"),
		batch.Count(revenue()),
		batch.CountRows().As("n"),
		batch.Max(revenue()),
		batch.Avg(batch.Col("price")),
		batch.Sum(revenue()).PerBatch().As("batch_revenue"),
	)
	if _, err := runQuery(t, stream, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(2)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range sink.Schema().Fields() {
		names = append(names, f.Name)
	}
	if want := []string{"key", "revenue", "count(Mul(price, qty))", "n", "max(Mul(price, qty))", "avg(price)", "batch_revenue"}; !slices.Equal(names, want) {
		t.Errorf("output columns %v, want %v", names, want)
	}
	want := map[int64][]string{
		0: {"a 10 2 3 6 3 10", "b 10 1 1 10 10 10"},
		1: {"a 16 3 4 6 2.75 6", "b 10 1 2 10 10 <nil>", "c 16 1 1 16 4 16"},
		2: {"a 17 4 5 6 2.4 1"},
	}
	if got := sinkBatches(sink); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("emitted\n got %v\nwant %v", got, want)
	}
}

// The state of an aggregate over an expression survives a restart: the
// second run goes on from the first one's sums.
func TestAggregateOverExpressionRestart(t *testing.T) {
	cp := localStore(t)
	stream := func(avail int) *Stream {
		return ReadStream(&orderSource{batches: orders, avail: avail}).GroupBy("key").
			Agg(batch.Sum(revenue()).As("revenue"), batch.Max(revenue()))
	}
	first := memsink.New("first")
	if _, err := runQuery(t, stream(2), WithCheckpoint(cp), WithSink(first), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	second := memsink.New("second")
	if _, err := runQuery(t, stream(3), WithCheckpoint(cp), WithSink(second), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(sinkBatches(second)), fmt.Sprint(map[int64][]string{2: {"a 17 6"}}); got != want {
		t.Errorf("after the restart: %s, want %s", got, want)
	}
}

// Aggregates over expressions in event-time windows: tumbling and sliding
// windows (append and complete mode), where b@4 is late, and session
// windows; the late-rows sink sees the user's columns, not the computed
// input of the aggregate.
func TestAggregateOverExpressionWindows(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    Window
		mode OutputMode
		aggs []batch.Agg
		want []string // every row emitted, over all batches
	}{
		{"tumbling", TumblingWindow("ts", 10*time.Second), Append,
			[]batch.Agg{batch.Sum(revenue()).As("revenue"), batch.CountRows().As("n")},
			[]string{"0 10 a 6 2", "0 10 b 10 1", "10 20 a 10 2", "20 30 c 16 1"}},
		{"sliding", SlidingWindow("ts", 10*time.Second, 5*time.Second), Append,
			[]batch.Agg{batch.Sum(revenue()).As("revenue"), batch.CountRows().As("n")},
			[]string{"-5 5 a 6 2", "-5 5 b 10 1", "0 10 a 6 2", "0 10 b 10 1", "10 20 a 10 2", "20 30 c 16 1", "25 35 c 16 1", "5 15 a 10 2"}},
		{"session", SessionWindow("ts", 5*time.Second), Append,
			[]batch.Agg{batch.Sum(revenue()).As("revenue"), batch.CountRows().As("n"), batch.Avg(revenue()), batch.Max(revenue())},
			[]string{"1 7 a 6 2 6 6", "12 19 a 10 2 5 6", "25 30 c 16 1 16 16", "3 8 b 10 1 10 10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink, late := memsink.New("out"), memsink.New("late")
			stream := ReadStream(&orderSource{batches: orders}).
				WithWatermark("ts", 5*time.Second).
				GroupByWindow(tc.w, "key").Agg(tc.aggs...)
			if _, err := runQuery(t, stream, WithCheckpoint(localStore(t)), WithSink(sink), WithLateRows(late),
				WithTrigger(AvailableNow()), WithOutputMode(tc.mode), WithStatePartitions(2)); err != nil {
				t.Fatal(err)
			}
			if got := rowStrings(sink.All()); !slices.Equal(got, tc.want) {
				t.Errorf("emitted\n got %v\nwant %v", got, tc.want)
			}
			if got := rowStrings(late.All()); !slices.Equal(got, []string{"b 4 <nil> 7"}) {
				t.Errorf("late rows %v, want b@4", got)
			}
			if !late.Schema().Equal(orderSchema) {
				t.Errorf("late rows schema %s, want the input's %s", late.Schema(), orderSchema)
			}
		})
	}
}

// An aggregate's input that overflows fails the batch naming the
// expression; so does a sum of products that leaves the int64 range,
// naming the expression and the group. Nothing is emitted.
func TestAggregateOverExpressionOverflow(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows []orderRow
		is   error
		want []string
	}{
		{"product", []orderRow{{"a", 1, n64(math.MaxInt64), n64(2)}}, batch.ErrOverflow,
			[]string{"Mul(price, qty)", "9223372036854775807"}},
		{"sum of products", []orderRow{{"a", 1, n64(1 << 61), n64(2)}, {"b", 1, n64(1), n64(1)}, {"a", 2, n64(1 << 61), n64(2)}}, batch.ErrSumOverflow,
			[]string{`"Mul(price, qty)"`, "key=a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := memsink.New("out")
			stream := ReadStream(&orderSource{batches: [][]orderRow{tc.rows}}).GroupBy("key").Agg(batch.Sum(revenue()).As("revenue"))
			_, err := runQuery(t, stream, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(1))
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v, want %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %s", err, w)
				}
			}
			if n := len(sink.All()); n != 0 {
				t.Errorf("%d rows reached the sink", n)
			}
		})
	}
}

// The computed input of an aggregate never takes the place of a user's
// column, even one named like the expression.
func TestAggregateOverExpressionNameClash(t *testing.T) {
	sink := memsink.New("out")
	stream := ReadStream(&orderSource{batches: orders[:1]}).
		Select(batch.As(batch.Col("key"), "key"), batch.As(batch.Col("price"), "price"), batch.As(batch.Col("qty"), "qty"),
			batch.As(batch.Lit(int64(100)), "Mul(price, qty)")).
		GroupBy("key").
		Agg(batch.Sum(revenue()).As("revenue"), batch.Sum(batch.Col("Mul(price, qty)")).As("hundreds"))
	if _, err := runQuery(t, stream, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	if got, want := rowStrings(sink.All()), []string{"a 10 300", "b 10 100"}; !slices.Equal(got, want) {
		t.Errorf("emitted %v, want %v", got, want)
	}
}

// Bad aggregate inputs fail when the query is built, naming the
// expression.
func TestAggregateOverExpressionBindErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		agg  batch.Agg
		want string
	}{
		{"unknown column", batch.Sum(batch.Mul(batch.Col("price"), batch.Col("nope"))), `"nope"`},
		{"sum of strings", batch.Sum(batch.Upper(batch.Col("key"))), "sum over column \"Upper(key)\" of type utf8"},
		{"no input", batch.Sum(nil), `sum "sum(*)" has no input column`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewQuery(ReadStream(&orderSource{}).GroupBy("key").Agg(tc.agg), WithCheckpoint(localStore(t)), WithSink(memsink.New("o")))
			if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want ErrInvalidQuery saying %s", err, tc.want)
			}
		})
	}
}
