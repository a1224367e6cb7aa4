package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/memsink"
)

// pairRow is a row with a two-column key.
type pairRow struct {
	k1, k2 string
	sec    int64
}

// pairSource replays fixed batches of pairRows, one per trigger.
type pairSource struct{ batches [][]pairRow }

var pairSchema = arrow.NewSchema([]arrow.Field{
	{Name: "k1", Type: arrow.BinaryTypes.String},
	{Name: "k2", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

func (s *pairSource) Schema() *arrow.Schema { return pairSchema }
func (s *pairSource) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (s *pairSource) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	k, _ := strconv.Atoi(string(start))
	return json.RawMessage(strconv.Itoa(min(k+1, len(s.batches)))), nil
}
func (s *pairSource) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.Atoi(string(start))
	b, _ := strconv.Atoi(string(end))
	mem := memory.DefaultAllocator
	k1, k2 := array.NewStringBuilder(mem), array.NewStringBuilder(mem)
	tb := array.NewTimestampBuilder(mem, pairSchema.Field(2).Type.(*arrow.TimestampType))
	defer k1.Release()
	defer k2.Release()
	defer tb.Release()
	n := 0
	for _, bt := range s.batches[a:b] {
		for _, r := range bt {
			k1.Append(r.k1)
			k2.Append(r.k2)
			tb.Append(arrow.Timestamp(r.sec * 1e6))
			n++
		}
	}
	cols := []arrow.Array{k1.NewArray(), k2.NewArray(), tb.NewArray()}
	rec := array.NewRecordBatch(pairSchema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	return emit(rec)
}

// Regression: the session operator grouped rows by a key string that
// joined the key columns with 0x01/0x1f bytes, so ("a\x1f\x01b", "c") and
// ("a", "b\x1f\x01c") were one key: their sessions merged, and the second
// merchant's session was reported from the first one's start. Now each
// column is length-prefixed and different keys never share a session.
func TestSessionKeysWithSeparatorBytesDoNotCollide(t *testing.T) {
	a := pairRow{k1: "a\x1f\x01b", k2: "c"}
	b := pairRow{k1: "a", k2: "b\x1f\x01c"}
	rowA, rowB := a, b
	rowA.sec, rowB.sec = 0, 5
	sink := memsink.New("out")
	stream := ReadStream(&pairSource{batches: [][]pairRow{{rowA, rowB}}}).
		GroupByWindow(SessionWindow("ts", 10*time.Second), "k1", "k2").ID("sessions").
		Agg(batch.CountRows().As("n"))
	if _, err := runQuery(t, stream, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()),
		WithOutputMode(Complete), WithStatePartitions(1)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range sink.Batch(0) {
		got = append(got, fmt.Sprintf("%q %q %d-%d n=%v", r[2], r[3], r[0].(time.Time).Unix(), r[1].(time.Time).Unix(), r[4]))
	}
	sort.Strings(got)
	want := []string{
		fmt.Sprintf("%q %q 5-15 n=1", b.k1, b.k2),
		fmt.Sprintf("%q %q 0-10 n=1", a.k1, a.k2),
	}
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sessions\n got %q\nwant %q", got, want)
	}
}

func TestKeyStringIsInjective(t *testing.T) {
	mem := memory.DefaultAllocator
	col := func(vals ...*string) arrow.Array {
		b := array.NewStringBuilder(mem)
		defer b.Release()
		for _, v := range vals {
			if v == nil {
				b.AppendNull()
			} else {
				b.Append(*v)
			}
		}
		return b.NewArray()
	}
	s := func(v string) *string { return &v }
	// Pairs of (k1, k2) rows that must all encode differently.
	c1 := col(s("a\x1f\x01b"), s("a"), nil, s(""), s("\x00"), s(""), s("ab"), s("a"))
	c2 := col(s("c"), s("b\x1f\x01c"), s(""), nil, nil, s("\x00"), s(""), s("b"))
	defer c1.Release()
	defer c2.Release()
	seen := map[string]int{}
	for i := 0; i < c1.Len(); i++ {
		k := keyString([]arrow.Array{c1, c2}, i)
		if j, ok := seen[k]; ok {
			t.Errorf("rows %d and %d encode alike: %q", j, i, k)
		}
		seen[k] = i
	}
}
