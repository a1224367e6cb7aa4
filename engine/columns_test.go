package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/memsink"
)

func fieldNames(s *memsink.Sink) []string {
	var out []string
	for _, f := range s.Schema().Fields() {
		out = append(out, f.Name)
	}
	return out
}

// WithColumn replaces a column in place or appends a new one, Drop removes
// columns; the others keep their order and values.
func TestWithColumnAndDrop(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream func(*Stream) *Stream
		cols   []string
		rows   []string
	}{
		{"append a column", func(s *Stream) *Stream { return s.WithColumn("revenue", revenue()) },
			[]string{"key", "ts", "price", "qty", "revenue"},
			[]string{"a 1 3 2 6", "a 12 1 4 4", "a 2 5 <nil> <nil>", "b 3 10 1 10"}},
		{"replace a column in place", func(s *Stream) *Stream {
			return s.WithColumn("price", batch.Mul(batch.Col("price"), batch.Lit(100)))
		},
			[]string{"key", "ts", "price", "qty"},
			[]string{"a 1 300 2", "a 12 100 4", "a 2 500 <nil>", "b 3 1000 1"}},
		{"drop", func(s *Stream) *Stream { return s.Drop("ts", "qty") },
			[]string{"key", "price"},
			[]string{"a 1", "a 3", "a 5", "b 10"}},
		{"with column then drop its inputs", func(s *Stream) *Stream {
			return s.WithColumn("revenue", revenue()).Drop("price", "qty").Where(batch.IsNotNull(batch.Col("revenue")))
		},
			[]string{"key", "ts", "revenue"},
			[]string{"a 1 6", "a 12 4", "b 3 10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := memsink.New("out")
			stream := tc.stream(ReadStream(&orderSource{batches: orders[:1]}))
			if _, err := runQuery(t, stream, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow())); err != nil {
				t.Fatal(err)
			}
			if got := fieldNames(sink); !slices.Equal(got, tc.cols) {
				t.Errorf("columns %v, want %v", got, tc.cols)
			}
			if got := rowStrings(sink.All()); !slices.Equal(got, tc.rows) {
				t.Errorf("rows %v, want %v", got, tc.rows)
			}
		})
	}
}

// A column set by WithColumn feeds a stateful step and the steps after it.
func TestWithColumnAroundAggregate(t *testing.T) {
	sink := memsink.New("out")
	stream := ReadStream(&orderSource{batches: orders[:1]}).
		WithColumn("revenue", revenue()).
		GroupBy("key").Agg(batch.Sum(batch.Col("revenue")).As("total"), batch.CountRows().As("n")).
		WithColumn("avg", batch.Div(batch.Col("total"), batch.Col("n"))).
		Drop("n")
	if _, err := runQuery(t, stream, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	if got, want := fieldNames(sink), []string{"key", "total", "avg"}; !slices.Equal(got, want) {
		t.Errorf("columns %v, want %v", got, want)
	}
	if got, want := rowStrings(sink.All()), []string{"a 10 3", "b 10 10"}; !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
}

func TestWithColumnAndDropErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream *Stream
		want   string
	}{
		{"drop a missing column", ReadStream(&orderSource{}).Drop("price", "nope"), `drop(price, nope): column "nope" is not in`},
		{"drop every column", ReadStream(&orderSource{}).Drop("key", "ts", "price", "qty"), "leaves no column"},
		{"a column without a name", ReadStream(&orderSource{}).WithColumn("", batch.Lit(1)), "needs a name"},
		{"an expression over a missing column", ReadStream(&orderSource{}).WithColumn("x", batch.Col("nope")), `unknown column "nope"`},
		{"a column dropped earlier", ReadStream(&orderSource{}).Drop("qty").WithColumn("revenue", revenue()), `unknown column "qty"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewQuery(tc.stream, WithCheckpoint(localStore(t)), WithSink(memsink.New("o")))
			if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want ErrInvalidQuery saying %s", err, tc.want)
			}
		})
	}
}
