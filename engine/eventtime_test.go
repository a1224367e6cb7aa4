package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
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

type evRow struct {
	key    string
	sec    int64 // event time, seconds
	amount int64
}

// scriptSource replays fixed batches: offset k means "the first k script
// batches"; one script batch per trigger.
type scriptSource struct {
	batches [][]evRow
}

var evSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func (s *scriptSource) Schema() *arrow.Schema { return evSchema }
func (s *scriptSource) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (s *scriptSource) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	k, _ := strconv.Atoi(string(start))
	return json.RawMessage(strconv.Itoa(min(k+1, len(s.batches)))), nil
}
func (s *scriptSource) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.Atoi(string(start))
	b, _ := strconv.Atoi(string(end))
	mem := memory.DefaultAllocator
	kb := array.NewStringBuilder(mem)
	tb := array.NewTimestampBuilder(mem, evSchema.Field(1).Type.(*arrow.TimestampType))
	ab := array.NewInt64Builder(mem)
	defer kb.Release()
	defer tb.Release()
	defer ab.Release()
	n := 0
	for _, bt := range s.batches[a:b] {
		for _, r := range bt {
			kb.Append(r.key)
			tb.Append(arrow.Timestamp(r.sec * 1e6))
			ab.Append(r.amount)
			n++
		}
	}
	cols := []arrow.Array{kb.NewArray(), tb.NewArray(), ab.NewArray()}
	rec := array.NewRecordBatch(evSchema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	return emit(rec)
}

// windowRows renders a windowed aggregation batch as sorted
// "start-end key sum count" strings (seconds).
func windowRows(rows [][]any) []string {
	var out []string
	for _, r := range rows {
		s := r[0].(time.Time).Unix()
		e := r[1].(time.Time).Unix()
		out = append(out, fmt.Sprintf("%d-%d %s %v %v", s, e, r[2], r[3], r[4]))
	}
	sort.Strings(out)
	return out
}

var outOfOrder = [][]evRow{
	{{"a", 1, 1}, {"a", 12, 2}},               // watermark after: 12-5 = 7
	{{"a", 3, 4}, {"a", 14, 8}, {"b", 9, 16}}, // a@3 is late (3 < 7); after: 9
	{{"a", 25, 32}},                           // after: 20
}

func runWindowed(t *testing.T, mode OutputMode, w Window, script [][]evRow, late *memsink.Sink) (*memsink.Sink, []Progress) {
	t.Helper()
	sink := memsink.New("out")
	var progress []Progress
	stream := ReadStream(&scriptSource{batches: script}).
		WithWatermark("ts", 5*time.Second).
		GroupByWindow(w, "key").ID("win").
		Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
	opts := []Option{WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithOutputMode(mode), WithStatePartitions(2),
		WithProgressListener(func(p Progress) { progress = append(progress, p) })}
	if late != nil {
		opts = append(opts, WithLateRows(late))
	}
	if _, err := runQuery(t, stream, opts...); err != nil {
		t.Fatal(err)
	}
	return sink, progress
}

func TestTumblingWindowOutputModes(t *testing.T) {
	cases := []struct {
		mode OutputMode
		want map[int64][]string // batch → rows
	}{
		{Append, map[int64][]string{
			// Nothing closes until the no-data batch 3 runs with
			// watermark 20: windows [0,10) and [10,20) close once.
			3: {"0-10 a 1 1", "0-10 b 16 1", "10-20 a 10 2"},
		}},
		{Update, map[int64][]string{
			0: {"0-10 a 1 1", "10-20 a 2 1"},
			1: {"0-10 b 16 1", "10-20 a 10 2"},
			2: {"20-30 a 32 1"},
		}},
		{Complete, map[int64][]string{
			0: {"0-10 a 1 1", "10-20 a 2 1"},
			1: {"0-10 a 1 1", "0-10 b 16 1", "10-20 a 10 2"},
			2: {"0-10 a 1 1", "0-10 b 16 1", "10-20 a 10 2", "20-30 a 32 1"},
			3: {"0-10 a 1 1", "0-10 b 16 1", "10-20 a 10 2", "20-30 a 32 1"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.mode.String(), func(t *testing.T) {
			late := memsink.New("late")
			sink, progress := runWindowed(t, tc.mode, TumblingWindow("ts", 10*time.Second), outOfOrder, late)
			got := map[int64][]string{}
			for _, id := range sink.BatchIDs() {
				if rows := sink.Batch(id); len(rows) > 0 {
					got[id] = windowRows(rows)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("emitted\n got %v\nwant %v", got, tc.want)
			}
			if len(progress) != 4 {
				t.Fatalf("%d batches, want 4 (3 with data, 1 for the watermark)", len(progress))
			}
			if d := progress[1].StateOperators[0].NumRowsDroppedByWatermark; d != 1 {
				t.Errorf("batch 1 dropped %d late rows, want 1", d)
			}
			if w := progress[3].EventTime["watermark"]; w != "1970-01-01T00:00:20.000Z" {
				t.Errorf("watermark of batch 3: %s", w)
			}
			if lr := late.Batch(1); len(lr) != 1 || lr[0][0] != "a" || lr[0][2] != int64(4) {
				t.Errorf("late rows of batch 1: %v", lr)
			}
			wantState := map[OutputMode]int64{Append: 1, Update: 1, Complete: 4}[tc.mode]
			if n := progress[3].StateOperators[0].NumRowsTotal; n != wantState {
				t.Errorf("state rows after the watermark passed: %d, want %d", n, wantState)
			}
		})
	}
}

// modelAppend computes, batch by batch, what append mode must emit for a
// windowed sum with the given window and watermark delay.
func modelAppend(script [][]evRow, size, slide, delay int64) map[int64][]string {
	type acc struct{ sum, n int64 }
	state := map[string]*acc{}
	out := map[int64][]string{}
	wm, maxT := int64(0), int64(0)
	emit := func(b int64) {
		var keys []string
		for k := range state {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			var s, e int64
			var key string
			fmt.Sscanf(k, "%d-%d %s", &s, &e, &key)
			if wm > 0 && e*1000 <= wm {
				out[b] = append(out[b], fmt.Sprintf("%s %d %d", k, state[k].sum, state[k].n))
				delete(state, k)
			}
		}
		sort.Strings(out[b])
	}
	b := int64(0)
	for _, bt := range script {
		for _, r := range bt {
			ms := r.sec * 1000
			maxT = max(maxT, ms)
			if ms < wm {
				continue // late
			}
			for st := (r.sec / slide) * slide; st > r.sec-size; st -= slide {
				if (st+size)*1000 <= wm {
					continue
				}
				k := fmt.Sprintf("%d-%d %s", st, st+size, r.key)
				if state[k] == nil {
					state[k] = &acc{}
				}
				state[k].sum += r.amount
				state[k].n++
			}
		}
		emit(b)
		b++
		wm = max(wm, max(maxT-delay*1000, 1))
	}
	emit(b) // the no-data batch for the last watermark move
	for k, v := range out {
		if len(v) == 0 {
			delete(out, k)
		}
	}
	return out
}

func TestSlidingWindowAppendMatchesModel(t *testing.T) {
	script := [][]evRow{
		{{"a", 1, 1}, {"b", 7, 2}, {"a", 11, 4}},
		{{"a", 4, 8}, {"b", 18, 16}, {"a", 2, 32}},
		{{"b", 9, 64}, {"a", 21, 128}, {"b", 30, 256}},
		{{"a", 26, 512}, {"b", 14, 1024}},
		{{"a", 44, 2048}},
	}
	sink, _ := runWindowed(t, Append, SlidingWindow("ts", 10*time.Second, 5*time.Second), script, nil)
	got := map[int64][]string{}
	for _, id := range sink.BatchIDs() {
		if rows := sink.Batch(id); len(rows) > 0 {
			got[id] = windowRows(rows)
		}
	}
	want := modelAppend(script, 10, 5, 5)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("emitted\n got %v\nwant %v", got, want)
	}
	// Every window appears once across batches.
	seen := map[string]bool{}
	for _, rows := range got {
		for _, r := range rows {
			w := strings.Join(strings.Fields(r)[:2], " ")
			if seen[w] {
				t.Fatalf("window %s emitted twice", w)
			}
			seen[w] = true
		}
	}
}

func TestWindowStateStaysBounded(t *testing.T) {
	// A steady stream: 20 batches of 10 s of events each, 3 keys.
	var script [][]evRow
	for b := int64(0); b < 40; b++ {
		var bt []evRow
		for s := b * 10; s < b*10+10; s++ {
			for _, k := range []string{"x", "y", "z"} {
				bt = append(bt, evRow{k, s, 1})
			}
		}
		script = append(script, bt)
	}
	_, progress := runWindowed(t, Append, TumblingWindow("ts", 10*time.Second), script, nil)
	var peak int64
	for _, p := range progress[5:] {
		peak = max(peak, p.StateOperators[0].NumRowsTotal)
	}
	// With a 5 s delay, at most the current and the previous window per
	// key are open after a batch.
	if peak > 6 {
		t.Fatalf("state grew to %d rows, want at most 6", peak)
	}
	var emitted int64
	for _, p := range progress {
		emitted += p.Sinks[0].NumOutputRows
	}
	if emitted < 3*38 {
		t.Fatalf("only %d windows emitted", emitted)
	}
}

func TestDropDuplicatesWithinWatermark(t *testing.T) {
	// Each event id up to 3 times, in different batches, at nearby times.
	var script [][]evRow
	want := map[string]bool{}
	for b := int64(0); b < 12; b++ {
		var bt []evRow
		for j := int64(0); j < 5; j++ {
			id := b*5 + j
			want[fmt.Sprint("e", id)] = true
			bt = append(bt, evRow{fmt.Sprint("e", id), id, id})
			if b > 0 {
				prev := id - 5
				bt = append(bt, evRow{fmt.Sprint("e", prev), prev, prev}) // a repeat one batch later
			}
			if b > 1 && j%2 == 0 {
				prev := id - 10
				bt = append(bt, evRow{fmt.Sprint("e", prev), prev, prev}) // and two batches later
			}
		}
		script = append(script, bt)
	}
	sink := memsink.New("out")
	stream := ReadStream(&scriptSource{batches: script}).
		WithWatermark("ts", 20*time.Second).
		DropDuplicatesWithinWatermark("key").Stream
	if _, err := runQuery(t, stream, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(3)); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range sink.All() {
		got[r[0].(string)]++
	}
	for id := range want {
		if got[id] != 1 {
			t.Errorf("%s emitted %d times", id, got[id])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d ids emitted, want %d", len(got), len(want))
	}
}

func TestAppendAggregationNeedsWindowAndWatermark(t *testing.T) {
	stream := ReadStream(&scriptSource{}).GroupBy("key").Agg(batch.Sum(batch.Col("amount")))
	_, err := NewQuery(stream, WithCheckpoint(localStore(t)), WithSink(memsink.New("o")), WithOutputMode(Append))
	if err == nil || !strings.Contains(err.Error(), "append output mode with an aggregation needs an event-time window") {
		t.Fatalf("got %v", err)
	}
}

// modelSessions computes append-mode session output batch by batch.
func modelSessions(script [][]evRow, gap, delay int64) map[int64][]string {
	type sess struct{ start, last, sum, n int64 }
	state := map[string][]*sess{}
	out := map[int64][]string{}
	wm, maxT := int64(0), int64(0)
	emit := func(b int64) {
		var keys []string
		for k := range state {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			var keep []*sess
			for _, s := range state[k] {
				if wm > 0 && (s.last+gap)*1000 <= wm {
					out[b] = append(out[b], fmt.Sprintf("%d-%d %s %d %d", s.start, s.last+gap, k, s.sum, s.n))
				} else {
					keep = append(keep, s)
				}
			}
			state[k] = keep
		}
		sort.Strings(out[b])
	}
	b := int64(0)
	for _, bt := range script {
		for _, r := range bt {
			maxT = max(maxT, r.sec*1000)
			if r.sec*1000 < wm {
				continue
			}
			// Merge the point with every session it touches.
			merged := &sess{start: r.sec, last: r.sec, sum: r.amount, n: 1}
			var keep []*sess
			for _, s := range state[r.key] {
				if r.sec < s.last+gap && s.start < r.sec+gap {
					merged.start = min(merged.start, s.start)
					merged.last = max(merged.last, s.last)
					merged.sum += s.sum
					merged.n += s.n
				} else {
					keep = append(keep, s)
				}
			}
			state[r.key] = append(keep, merged)
		}
		emit(b)
		b++
		wm = max(wm, max(maxT-delay*1000, 1))
	}
	emit(b)
	for k, v := range out {
		if len(v) == 0 {
			delete(out, k)
		}
	}
	return out
}

func TestSessionWindowAppendMatchesModel(t *testing.T) {
	script := [][]evRow{
		{{"a", 1, 1}, {"a", 3, 2}, {"b", 2, 4}},
		{{"a", 10, 8}, {"b", 4, 16}, {"a", 6, 32}}, // a@6 bridges [1,3] and 10: one session 1..10
		{{"a", 30, 64}, {"b", 20, 128}},
		{{"b", 23, 256}, {"a", 33, 512}, {"a", 12, 1024}}, // a@12 is late (watermark 25)
		{{"a", 60, 2048}},
	}
	sink := memsink.New("out")
	stream := ReadStream(&scriptSource{batches: script}).
		WithWatermark("ts", 5*time.Second).
		GroupByWindow(SessionWindow("ts", 5*time.Second), "key").ID("sessions").
		Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
	if _, err := runQuery(t, stream, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithOutputMode(Append), WithStatePartitions(2)); err != nil {
		t.Fatal(err)
	}
	got := map[int64][]string{}
	for _, id := range sink.BatchIDs() {
		if rows := sink.Batch(id); len(rows) > 0 {
			got[id] = windowRows(rows)
		}
	}
	want := modelSessions(script, 5, 5)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("emitted\n got %v\nwant %v", got, want)
	}
	if len(want) == 0 {
		t.Fatal("model emitted nothing")
	}
}

func TestSessionWindowRefusesUpdateAndFirst(t *testing.T) {
	base := ReadStream(&scriptSource{}).WithWatermark("ts", time.Second)
	_, err := NewQuery(base.GroupByWindow(SessionWindow("ts", time.Second), "key").Agg(batch.Sum(batch.Col("amount"))),
		WithCheckpoint(localStore(t)), WithSink(memsink.New("o")), WithOutputMode(Update))
	if err == nil || !strings.Contains(err.Error(), "session windows support append and complete") {
		t.Fatalf("update mode: %v", err)
	}
	_, err = NewQuery(base.GroupByWindow(SessionWindow("ts", time.Second), "key").Agg(batch.First(batch.Col("amount"))),
		WithCheckpoint(localStore(t)), WithSink(memsink.New("o")), WithOutputMode(Append))
	if err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("first over sessions: %v", err)
	}
}
