package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// sumProc keeps a running sum of amount per key and emits it.
type sumProc struct{ sum *ValueState[int64] }

type sumOut struct {
	Key   string `onceflow:"key"`
	Sum   int64  `onceflow:"sum"`
	Batch int64  `onceflow:"batch"`
}

func (p *sumProc) Init(s *ProcessorSpec) error {
	s.Output(sumOut{})
	p.sum = NewValueState[int64](s, "sum")
	return nil
}

func (p *sumProc) Handle(k *KeyContext, rows *Rows) error {
	var in []struct{ Amount int64 }
	if err := rows.Decode(&in); err != nil {
		return err
	}
	s, _ := p.sum.Get(k)
	for _, r := range in {
		s += r.Amount
	}
	p.sum.Set(k, s)
	k.Emit(sumOut{Key: k.Key().Values()[0].(string), Sum: s, Batch: k.BatchID()})
	return nil
}

func (p *sumProc) OnTimer(*KeyContext, Timer) error { return nil }

// lastSums is the newest sum per key in the sink.
func lastSums(s *memsink.Sink) map[string]int64 {
	out := map[string]int64{}
	for _, r := range s.All() {
		out[r[0].(string)] = r[1].(int64)
	}
	return out
}

func seqSums(n, keys int64) map[string]int64 {
	out := map[string]int64{}
	for i := range n {
		out["k"+strconv.FormatInt(i%keys, 10)] += i % 10
	}
	return out
}

func TestProcessorRunningSumAcrossRestarts(t *testing.T) {
	cp := localStore(t)
	src := newSeq(40, 10, 5)
	sink := memsink.New("sums")
	q := func() *Stream { return ReadStream(src).GroupBy("key").ID("sums").Process(&sumProc{}) }
	if _, err := runQuery(t, q(), WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(3)); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(lastSums(sink)), fmt.Sprint(seqSums(40, 5)); got != want {
		t.Fatalf("sums after 4 batches: %s, want %s", got, want)
	}
	// Restart twice, reading the state back each time.
	for _, n := range []int64{55, 93} {
		src.avail.Store(n)
		if _, err := runQuery(t, q(), WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(3)); err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprint(lastSums(sink)), fmt.Sprint(seqSums(n, 5)); got != want {
			t.Fatalf("sums after %d rows: %s, want %s", n, got, want)
		}
	}
	if r := sink.Repeats(); len(r) != 0 {
		t.Fatalf("repeated batches: %v", r)
	}
}

// listSource serves recs, one record per batch; avail says how many exist.
type listSource struct {
	schema *arrow.Schema
	recs   []arrow.RecordBatch
	avail  atomic.Int64
}

func newListSource(schema *arrow.Schema, recs ...arrow.RecordBatch) *listSource {
	s := &listSource{schema: schema, recs: recs}
	s.avail.Store(int64(len(recs)))
	return s
}

func (s *listSource) Schema() *arrow.Schema { return s.schema }
func (s *listSource) Description() string   { return "list" }
func (s *listSource) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage(`0`), nil
}
func (s *listSource) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	n, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(strconv.FormatInt(min(n+1, max(n, s.avail.Load())), 10)), nil
}
func (s *listSource) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.ParseInt(string(start), 10, 64)
	b, _ := strconv.ParseInt(string(end), 10, 64)
	for i := a; i < b; i++ {
		if err := emit(s.recs[i]); err != nil {
			return err
		}
	}
	return nil
}

var cardSchema = arrow.NewSchema([]arrow.Field{
	{Name: "card", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_ms},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// cardRec builds a record of (card, ts seconds, amount) triples.
func cardRec(rows ...any) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, cardSchema)
	defer b.Release()
	for i := 0; i < len(rows); i += 3 {
		b.Field(0).(*array.StringBuilder).Append(rows[i].(string))
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(rows[i+1].(int)) * 1000))
		b.Field(2).(*array.Int64Builder).Append(int64(rows[i+2].(int)))
	}
	return b.NewRecordBatch()
}

// windowProc counts rows per card and, 10 s after the first row (event
// time), emits the count and forgets it.
type windowProc struct{ n *ValueState[int64] }

type windowOut struct {
	Card  string
	Count int64
	Fired time.Time
	Batch int64
}

func (p *windowProc) Init(s *ProcessorSpec) error {
	s.Output(windowOut{})
	p.n = NewValueState[int64](s, "n")
	return nil
}

func (p *windowProc) Handle(k *KeyContext, rows *Rows) error {
	var in []struct{ Ts time.Time }
	if err := rows.Decode(&in); err != nil {
		return err
	}
	n, ok := p.n.Get(k)
	if !ok {
		k.RegisterTimer(EventTime, in[0].Ts.Add(10*time.Second))
	}
	p.n.Set(k, n+int64(len(in)))
	return nil
}

func (p *windowProc) OnTimer(k *KeyContext, t Timer) error {
	n, _ := p.n.Get(k)
	p.n.Clear(k)
	k.Emit(windowOut{Card: k.Key().Values()[0].(string), Count: n, Fired: t.At, Batch: k.BatchID()})
	return nil
}

func TestProcessorEventTimeTimersFireWhenTheWatermarkPasses(t *testing.T) {
	cp := localStore(t)
	src := newListSource(cardSchema,
		cardRec("a", 0, 1, "a", 1, 1, "b", 5, 1),
		cardRec("a", 8, 1),
		cardRec("c", 30, 1), // watermark 30 s after this batch: a (10 s) and b (15 s) fire in the next batch, without input
	)
	sink := memsink.New("w")
	stream := ReadStream(src).WithWatermark("ts", 0).GroupBy("card").ID("w").Process(&windowProc{})
	if _, err := runQuery(t, stream, WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(2)); err != nil {
		t.Fatal(err)
	}
	got := sortedRows(sink.All())
	want := "[a 3 1970-01-01 00:00:10 +0000 UTC 3]\n[b 1 1970-01-01 00:00:15 +0000 UTC 3]"
	if got != want {
		t.Fatalf("fired %s, want %s", got, want)
	}
	// c's timer (40 s) is durable: listed in the timers store, fired after
	// a restart once the watermark passes it.
	if n := countStoreRows(t, cp, "w", 2, timersStore); n != 1 {
		t.Fatalf("timers store holds %d rows, want 1 (c at 40 s)", n)
	}
	src.recs = append(src.recs, cardRec("d", 50, 1))
	src.avail.Store(4)
	sink2 := memsink.New("w2")
	if _, err := runQuery(t, stream, WithCheckpoint(cp), WithSink(sink2), WithTrigger(AvailableNow()), WithStatePartitions(2)); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(sink2.All()); got != "[[c 1 1970-01-01 00:00:40 +0000 UTC 5]]" {
		t.Fatalf("after restart fired %s", got)
	}
}

// countStoreRows counts the rows of the newest committed version of a
// named store, over every partition.
func countStoreRows(t *testing.T, cp storage.Store, op string, parts int, store string) int64 {
	t.Helper()
	ctx := context.Background()
	n := int64(0)
	o, err := newProcOp(&config{partitions: 1, mem: memory.DefaultAllocator}, cardSchema, &processStep{id: op, keys: []string{"card"}, proc: &pingProc{}}, &watermarkStep{col: "ts"})
	if err != nil {
		t.Fatal(err)
	}
	var spec storeSpec
	for _, s := range o.stores() {
		if s.name == store || (s.name == "seen" && store == "n") {
			spec = s
		}
	}
	for p := range parts {
		st, err := statestore.Open(ctx, StateFolder(cp, op, p, store), statestore.Options{KeySchema: spec.key, ValueSchema: spec.value})
		if err != nil {
			t.Fatal(err)
		}
		deltas, snaps, err := st.Versions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v := int64(-1)
		for _, x := range append(deltas, snaps...) {
			v = max(v, x)
		}
		recs, err := st.Load(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			n += r.NumRows()
			r.Release()
		}
	}
	return n
}

// pingProc registers a processing-time timer a minute after each batch
// with rows, and a value with a TTL of 90 s.
type pingProc struct {
	seen *ValueState[string]
}

type pingOut struct {
	Card string
	What string
	At   time.Time
}

func (p *pingProc) Init(s *ProcessorSpec) error {
	s.Output(pingOut{})
	p.seen = NewValueState[string](s, "seen", WithTTL(90*time.Second))
	return nil
}

func (p *pingProc) Handle(k *KeyContext, rows *Rows) error {
	card := k.Key().Values()[0].(string)
	if v, ok := p.seen.Get(k); ok {
		k.Emit(pingOut{Card: card, What: "still " + v, At: k.BatchTime()})
	}
	p.seen.Set(k, fmt.Sprintf("seen@%d", k.BatchID()))
	k.RegisterTimer(ProcessingTime, k.BatchTime().Add(time.Minute))
	return nil
}

func (p *pingProc) OnTimer(k *KeyContext, t Timer) error {
	v, ok := p.seen.Get(k)
	if !ok {
		v = "expired"
	}
	k.Emit(pingOut{Card: k.Key().Values()[0].(string), What: "timer " + v, At: k.BatchTime()})
	return nil
}

func TestProcessorProcessingTimersAndTTLFollowTheBatchTimestamp(t *testing.T) {
	cp := localStore(t)
	var now atomic.Int64
	now.Store(1_000_000)
	clock := WithClock(func() time.Time { return time.UnixMilli(now.Load()) })
	src := newListSource(cardSchema, cardRec("a", 0, 1))
	sink := memsink.New("p")
	stream := ReadStream(src).GroupBy("card").ID("ping").Process(&pingProc{})
	run := func() {
		t.Helper()
		if _, err := runQuery(t, stream, WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(1), clock); err != nil {
			t.Fatal(err)
		}
	}
	run() // batch 0 at 1000 s: timer at 1060 s, seen expires at 1090 s
	now.Store(1_030_000)
	run() // nothing due: no batch
	if ids := sink.BatchIDs(); len(ids) != 1 {
		t.Fatalf("batches %v before the timer is due", ids)
	}
	now.Store(1_070_000)
	run() // batch 1, no input: the timer fires; seen still there
	now.Store(1_100_000)
	src.recs = append(src.recs, cardRec("a", 1, 1))
	src.avail.Store(2)
	run() // batch 2: seen expired at 1090 s; new timer at 1160 s
	got := fmt.Sprint(sink.All())
	want := "[[a timer seen@0 1970-01-01 00:17:50 +0000 UTC]]"
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if n := countStoreRows(t, cp, "ping", 1, timersStore); n != 1 {
		t.Fatalf("timers store holds %d rows, want 1 (%v)", n, sink.BatchIDs())
	}
	now.Store(1_300_000)
	run() // batch 3: timer fires, seen (written at 1100 s) expired at 1190 s
	if got := fmt.Sprint(sink.Batch(3)); got != "[[a timer expired 1970-01-01 00:21:40 +0000 UTC]]" {
		t.Fatalf("batch 3: %s", got)
	}
	if n := countStoreRows(t, cp, "ping", 1, "seen"); n != 0 {
		t.Fatalf("seen store holds %d rows after the TTL", n)
	}
	if n := countStoreRows(t, cp, "ping", 1, timersStore); n != 0 {
		t.Fatalf("timers store holds %d rows after firing", n)
	}
}

// collectProc keeps a list of amounts and a map amount → count per key,
// emits them as strings in state order.
type collectProc struct {
	list   *ListState[int64]
	counts *MapState[int64, int64]
}

type collectOut struct {
	Key, List, Counts string
}

func (p *collectProc) Init(s *ProcessorSpec) error {
	s.Output(collectOut{})
	p.list = NewListState[int64](s, "list")
	p.counts = NewMapState[int64, int64](s, "counts")
	return nil
}

func (p *collectProc) Handle(k *KeyContext, rows *Rows) error {
	var in []struct{ Amount int64 }
	if err := rows.Decode(&in); err != nil {
		return err
	}
	for _, r := range in {
		p.list.Append(k, r.Amount)
		n, _ := p.counts.Get(k, r.Amount)
		p.counts.Put(k, r.Amount, n+1)
	}
	if l := p.list.Get(k); len(l) > 6 {
		p.list.Set(k, l[len(l)-6:])
	}
	p.counts.Remove(k, 0)
	var cs []string
	for _, a := range p.counts.Keys(k) {
		n, _ := p.counts.Get(k, a)
		cs = append(cs, fmt.Sprintf("%d:%d", a, n))
	}
	k.Emit(collectOut{Key: k.Key().String(), List: fmt.Sprint(p.list.Get(k)), Counts: strings.Join(cs, ",")})
	return nil
}

func (p *collectProc) OnTimer(*KeyContext, Timer) error { return nil }

func TestProcessorListAndMapStateAcrossRestarts(t *testing.T) {
	src := newSeq(60, 10, 3)
	run := func(cp storage.Store, restartEvery bool) [][]any {
		sink := memsink.New("c")
		stream := ReadStream(src).GroupBy("key").Process(&collectProc{})
		if !restartEvery {
			src.avail.Store(60)
			if _, err := runQuery(t, stream, WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow())); err != nil {
				t.Fatal(err)
			}
			return sink.All()
		}
		for n := int64(10); n <= 60; n += 10 {
			src.avail.Store(n)
			if _, err := runQuery(t, stream, WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow())); err != nil {
				t.Fatal(err)
			}
		}
		return sink.All()
	}
	a, b := run(localStore(t), false), run(localStore(t), true)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("outputs differ:\n one run:  %v\n restarts: %v", a, b)
	}
	var last string
	for _, r := range a {
		if r[0] == "[k2]" {
			last = fmt.Sprint(r)
		}
	}
	// k2's amounts: i%10 for i = 2, 5, 8, … < 60.
	if last != "[[k2] [4 7 0 3 6 9] 1:2,2:2,3:2,4:2,5:2,6:2,7:2,8:2,9:2]" {
		t.Fatalf("last row %s", last)
	}
}

// initProc starts each key's sum from an initial-state table.
type initProc struct{ sumProc }

func (p *initProc) InitialState(k *KeyContext, rows *Rows) error {
	var in []struct{ Start int64 }
	if err := rows.Decode(&in); err != nil {
		return err
	}
	p.sum.Set(k, in[0].Start)
	return nil
}

func TestProcessorInitialState(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "key", Type: arrow.BinaryTypes.String}, {Name: "start", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"k0", "k1", "k9"}, nil)
	b.Field(1).(*array.Int64Builder).AppendValues([]int64{1000, 2000, 9000}, nil)
	init := b.NewRecordBatch()
	b.Release()
	defer init.Release()
	cp := localStore(t)
	src := newSeq(20, 10, 2)
	sink := memsink.New("i")
	q := ReadStream(src).GroupBy("key").Process(&initProc{}, WithInitialState(init))
	if _, err := runQuery(t, q, WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(2)); err != nil {
		t.Fatal(err)
	}
	want := seqSums(20, 2)
	want["k0"] += 1000
	want["k1"] += 2000
	if got := fmt.Sprint(lastSums(sink)); got != fmt.Sprint(want) {
		t.Fatalf("sums %s, want %s", got, fmt.Sprint(want))
	}
	// A restart does not apply the table again.
	src.avail.Store(30)
	if _, err := runQuery(t, q, WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(2)); err != nil {
		t.Fatal(err)
	}
	want = seqSums(30, 2)
	want["k0"] += 1000
	want["k1"] += 2000
	if got := fmt.Sprint(lastSums(sink)); got != fmt.Sprint(want) {
		t.Fatalf("after restart sums %s, want %s", got, fmt.Sprint(want))
	}
}

// evolveProc keeps a value of type T (one of the schema versions below).
type evolveProc[T any] struct {
	st  *ValueState[T]
	set func(old T, ok bool, add int64) T
	get func(T) string
}

func (p *evolveProc[T]) Init(s *ProcessorSpec) error {
	s.Output(collectOut{})
	p.st = NewValueState[T](s, "acc")
	return nil
}

func (p *evolveProc[T]) Handle(k *KeyContext, rows *Rows) error {
	old, ok := p.st.Get(k)
	v := p.set(old, ok, int64(rows.Len()))
	p.st.Set(k, v)
	k.Emit(collectOut{Key: k.Key().String(), List: p.get(v)})
	return nil
}

func (p *evolveProc[T]) OnTimer(*KeyContext, Timer) error { return nil }

type accV1 struct{ N int64 }
type accV2 struct {
	N    int64
	Note *string
}
type accBadType struct{ N int32 }
type accNotNull struct {
	N int64
	M int64
}

func TestProcessorStateSchemaEvolution(t *testing.T) {
	cp := localStore(t)
	src := newSeq(20, 10, 2)
	run := func(p Processor) (*memsink.Sink, error) {
		sink := memsink.New("e")
		q, err := NewQuery(ReadStream(src).GroupBy("key").ID("acc").Process(p), WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return sink, q.Run(ctx)
	}
	v1 := &evolveProc[accV1]{set: func(o accV1, _ bool, n int64) accV1 { return accV1{N: o.N + n} }, get: func(v accV1) string { return fmt.Sprint(v.N) }}
	if _, err := run(v1); err != nil {
		t.Fatal(err)
	}
	src.avail.Store(30)
	note := "v2"
	v2 := &evolveProc[accV2]{
		set: func(o accV2, ok bool, n int64) accV2 {
			if !ok {
				t.Errorf("v2 found no state")
			}
			if o.Note != nil {
				t.Errorf("old row read a note %q", *o.Note)
			}
			return accV2{N: o.N + n, Note: &note}
		},
		get: func(v accV2) string { return fmt.Sprint(v.N, *v.Note) },
	}
	sink, err := run(v2)
	if err != nil {
		t.Fatalf("adding a nullable field: %v", err)
	}
	if got := fmt.Sprint(sink.All()); got != "[[[k0] 15v2 ] [[k1] 15v2 ]]" {
		t.Fatalf("after evolution: %s", got)
	}
	for name, p := range map[string]Processor{
		"type changed":  &evolveProc[accBadType]{set: func(o accBadType, _ bool, n int64) accBadType { return o }, get: func(accBadType) string { return "" }},
		"not nullable":  &evolveProc[accNotNull]{set: func(o accNotNull, _ bool, n int64) accNotNull { return o }, get: func(accNotNull) string { return "" }},
		"field removed": v1,
	} {
		_, err := run(p)
		if !errors.Is(err, ErrIncompatibleRestart) {
			t.Fatalf("%s: err %v, want ErrIncompatibleRestart", name, err)
		}
		if !strings.Contains(err.Error(), `"name":"Note"`) || !strings.Contains(err.Error(), "this query declares") {
			t.Fatalf("%s: the error does not show both schemas: %v", name, err)
		}
	}
}

// sortedRows formats rows sorted, for tests where partition order is not
// the point.
func sortedRows(rows [][]any) string {
	s := make([]string, len(rows))
	for i, r := range rows {
		s[i] = fmt.Sprint(r)
	}
	sort.Strings(s)
	return strings.Join(s, "\n")
}

// badProc misbehaves as its mode says.
type badProc struct {
	mode string
	n    *ValueState[int64]
}

func (p *badProc) Init(s *ProcessorSpec) error {
	switch p.mode {
	case "no output":
	case "reserved name":
		s.Output(sumOut{})
		NewValueState[int64](s, "timers")
	case "bad name":
		s.Output(sumOut{})
		NewValueState[int64](s, "a/b")
	case "bad type":
		s.Output(sumOut{})
		NewValueState[map[string]int](s, "m")
	default:
		s.Output(sumOut{})
		p.n = NewValueState[int64](s, "n")
	}
	return nil
}

func (p *badProc) Handle(k *KeyContext, rows *Rows) error {
	switch p.mode {
	case "wrong emit":
		k.Emit(collectOut{})
	case "event timer without watermark":
		k.RegisterTimer(EventTime, k.BatchTime())
	case "missing column":
		var in []struct{ Nope int64 }
		return rows.Decode(&in)
	}
	return nil
}

func (p *badProc) OnTimer(*KeyContext, Timer) error { return nil }

func TestProcessorMisuseFailsWithAClearError(t *testing.T) {
	for mode, want := range map[string]string{
		"no output":                     "no output type declared",
		"reserved name":                 `state name "timers" is reserved`,
		"bad name":                      `state name "a/b"`,
		"bad type":                      "is not supported",
		"wrong emit":                    "processor declared output engine.sumOut",
		"event timer without watermark": "needs a watermark",
		"missing column":                "field Nope of struct { Nope int64 } has no column",
	} {
		t.Run(mode, func(t *testing.T) {
			q, err := NewQuery(ReadStream(newSeq(10, 10, 2)).GroupBy("key").Process(&badProc{mode: mode}),
				WithCheckpoint(localStore(t)), WithSink(memsink.New("x")), WithTrigger(AvailableNow()))
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				err = q.Run(ctx)
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err %v, want one containing %q", err, want)
			}
			if strings.HasPrefix(mode, "wrong") || strings.HasPrefix(mode, "event") || strings.HasPrefix(mode, "missing") {
				if !strings.Contains(err.Error(), "key [k0]") && !strings.Contains(err.Error(), "key [k1]") {
					t.Fatalf("the error does not name the key: %v", err)
				}
			}
		})
	}
}

// TestProcessorReleasesEveryBuffer runs processors with state, timers,
// initial state and a restart over a checked allocator.
func TestProcessorReleasesEveryBuffer(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cp, cp2 := localStore(t), localStore(t)
	src := newListSource(cardSchema, cardRec("a", 0, 1, "b", 5, 1), cardRec("a", 8, 1), cardRec("c", 30, 1))
	seq := newSeq(20, 10, 3)
	schema := arrow.NewSchema([]arrow.Field{{Name: "key", Type: arrow.BinaryTypes.String}, {Name: "start", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(mem, schema)
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"k0", "k2"}, nil)
	b.Field(1).(*array.Int64Builder).AppendValues([]int64{10, 20}, nil)
	init := b.NewRecordBatch()
	b.Release()
	for i := range 2 {
		trig := Once()
		if i == 1 {
			trig = AvailableNow()
		}
		if _, err := runQuery(t, ReadStream(src).WithWatermark("ts", 0).GroupBy("card").ID("w").Process(&windowProc{}),
			WithCheckpoint(cp), WithSink(memsink.New("w")), WithTrigger(trig), WithStatePartitions(2), WithAllocator(mem)); err != nil {
			t.Fatal(err)
		}
		if _, err := runQuery(t, ReadStream(seq).GroupBy("key").Process(&initProc{}, WithInitialState(init)),
			WithCheckpoint(cp2), WithSink(memsink.New("i")), WithTrigger(trig), WithStatePartitions(2), WithAllocator(mem)); err != nil {
			t.Fatal(err)
		}
	}
	init.Release()
	mem.AssertSize(t, 0)
}
