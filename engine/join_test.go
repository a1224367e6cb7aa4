package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
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
)

// jRow is a row of a join test side; key "" is a null key.
type jRow struct {
	key string
	sec int64
	id  int64
}

// jSource replays fixed batches like scriptSource, with nullable keys and a
// cap on the batches it shows (limit), for restarts.
type jSource struct {
	name    string
	batches [][]jRow
	limit   atomic.Int64
}

var jSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func newJSource(name string, batches [][]jRow) *jSource {
	s := &jSource{name: name, batches: batches}
	s.limit.Store(int64(len(batches)))
	return s
}

func (s *jSource) Schema() *arrow.Schema { return jSchema }
func (s *jSource) Description() string   { return "script[" + s.name + "]" }
func (s *jSource) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (s *jSource) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	k, _ := strconv.Atoi(string(start))
	return json.RawMessage(strconv.Itoa(min(k+1, int(s.limit.Load())))), nil
}
func (s *jSource) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.Atoi(string(start))
	b, _ := strconv.Atoi(string(end))
	mem := memory.DefaultAllocator
	kb := array.NewStringBuilder(mem)
	tb := array.NewTimestampBuilder(mem, jSchema.Field(1).Type.(*arrow.TimestampType))
	ib := array.NewInt64Builder(mem)
	defer kb.Release()
	defer tb.Release()
	defer ib.Release()
	n := 0
	for _, bt := range s.batches[a:b] {
		for _, r := range bt {
			if r.key == "" {
				kb.AppendNull()
			} else {
				kb.Append(r.key)
			}
			tb.Append(arrow.Timestamp(r.sec * 1000))
			ib.Append(r.id)
			n++
		}
	}
	cols := []arrow.Array{kb.NewArray(), tb.NewArray(), ib.NewArray()}
	rec := array.NewRecordBatch(jSchema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	return emit(rec)
}

// jScript draws a random script: batches of rows for each side, with event
// times around a clock that advances 10 s a batch, jittered both ways
// (out of order, some late), keys from a small set or null, and exact
// duplicates. The last batch pushes both watermarks far ahead.
func jScript(rng *rand.Rand, batches int) (left, right [][]jRow) {
	id := int64(0)
	side := func(b int) []jRow {
		var rows []jRow
		for range rng.IntN(6) {
			id++
			key := string(rune('a' + rng.IntN(4)))
			if rng.IntN(8) == 0 {
				key = ""
			}
			r := jRow{key: key, sec: max(1, int64(b*10+rng.IntN(30)-18)), id: id}
			rows = append(rows, r)
			if rng.IntN(6) == 0 {
				rows = append(rows, r) // an exact duplicate
			}
		}
		return rows
	}
	for b := range batches {
		left = append(left, side(b))
		right = append(right, side(b))
	}
	id++
	left = append(left, []jRow{{key: "flush", sec: int64(batches*10 + 1000), id: id}})
	right = append(right, []jRow{{key: "flush", sec: int64(batches*10 + 1000), id: id + 1}})
	return left, right
}

// jModel is the reference: a nested-loop join of the rows that were not
// late, with the watermark of each batch computed from the script (min of
// both sides' max event time minus delay), and the outer rows of those the
// final watermark has passed. It returns the output rows (sorted strings),
// the late rows and the rows left in state.
func jModel(kind JoinKind, left, right [][]jRow, delay, lower, upper int64) (out []string, late, state int64) {
	return jModelChained(kind, left, right, delay, lower, upper, false)
}

// jModelChained is jModel for a join behind a deduplication of the left
// side (dedup: exact repeats of a left row are dropped; the right side's
// rows are late by the previous batch's watermark, as for every operator
// after the first).
func jModelChained(kind JoinKind, left, right [][]jRow, delay, lower, upper int64, dedup bool) (out []string, late, state int64) {
	wm, prevWM := int64(0), int64(0)
	maxL, maxR := int64(0), int64(0)
	var L, R []jRow
	seen := map[jRow]bool{}
	for b := range left {
		for _, r := range left[b] {
			if r.sec*1000 < wm {
				late++
			} else if !dedup || !seen[r] {
				seen[r] = true
				L = append(L, r)
			}
			maxL = max(maxL, r.sec*1000)
		}
		rightWM := wm
		if dedup {
			rightWM = prevWM
		}
		for _, r := range right[b] {
			if r.sec*1000 < rightWM {
				late++
			} else {
				R = append(R, r)
			}
			maxR = max(maxR, r.sec*1000)
		}
		w := func(m int64) int64 {
			if m == 0 {
				return 0
			}
			return max(m-delay, 1)
		}
		prevWM = wm
		wm = max(wm, min(w(maxL), w(maxR)))
	}
	row := func(r *jRow) string {
		if r == nil {
			return "null null null"
		}
		k := r.key
		if k == "" {
			k = "null"
		}
		return fmt.Sprintf("%s %d %d", k, r.sec, r.id)
	}
	lm, rm := make([]bool, len(L)), make([]bool, len(R))
	for i := range L {
		for j := range R {
			l, r := L[i], R[j]
			if l.key == "" || l.key != r.key || r.sec*1000 < l.sec*1000+lower || r.sec*1000 > l.sec*1000+upper {
				continue
			}
			lm[i], rm[j] = true, true
			if kind != LeftSemi {
				out = append(out, row(&l)+" | "+row(&r))
			}
		}
	}
	for i, l := range L {
		gone := l.key == "" || l.sec*1000+upper < wm
		switch {
		case kind == LeftSemi && lm[i]:
			out = append(out, row(&l))
		case kind.outer(0) && !lm[i] && gone:
			out = append(out, row(&l)+" | "+row(nil))
		}
		if !gone && !(kind == LeftSemi && lm[i]) {
			state++
		}
	}
	for j, r := range R {
		gone := r.key == "" || r.sec*1000-lower < wm
		if kind.outer(1) && !rm[j] && gone {
			out = append(out, row(nil)+" | "+row(&r))
		}
		if !gone {
			state++
		}
	}
	sort.Strings(out)
	return out, late, state
}

func jRows(rows [][]any, semi bool) []string {
	var out []string
	cell := func(v any) string {
		switch x := v.(type) {
		case nil:
			return "null"
		case time.Time:
			return strconv.FormatInt(x.Unix(), 10)
		}
		return fmt.Sprint(v)
	}
	for _, r := range rows {
		s := make([]string, len(r))
		for i, v := range r {
			s[i] = cell(v)
		}
		if semi {
			out = append(out, strings.Join(s, " "))
		} else {
			out = append(out, strings.Join(s[:3], " ")+" | "+strings.Join(s[3:], " "))
		}
	}
	sort.Strings(out)
	return out
}

func joinStream(l, r *jSource, kind JoinKind, delay time.Duration, lower, upper time.Duration) *Stream {
	right := ReadStream(r).WithWatermark("ts", delay)
	return ReadStream(l).WithWatermark("ts", delay).
		Join(right, kind, On("key", "key"), Within("ts", "ts", lower, upper)).ID("j")
}

// TestStreamJoinMatchesNestedLoopModel runs every join kind over random
// scripts (late rows, duplicates, null keys, out-of-order events) and
// compares the output, the late count and the rows left in state with a
// nested-loop reference.
func TestStreamJoinMatchesNestedLoopModel(t *testing.T) {
	kinds := []JoinKind{Inner, LeftOuter, RightOuter, FullOuter, LeftSemi}
	bounds := [][2]time.Duration{{-5 * time.Second, 10 * time.Second}, {0, 0}, {-20 * time.Second, -3 * time.Second}}
	for seed := range 6 {
		for _, kind := range kinds {
			b := bounds[seed%len(bounds)]
			t.Run(fmt.Sprintf("%s/seed%d", kind, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(seed), 16))
				left, right := jScript(rng, 8)
				delay := 5 * time.Second
				sink := memsink.New("out")
				var progress []Progress
				stream := joinStream(newJSource("l", left), newJSource("r", right), kind, delay, b[0], b[1])
				_, err := runQuery(t, stream, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(3),
					WithProgressListener(func(p Progress) { progress = append(progress, p) }))
				if err != nil {
					t.Fatal(err)
				}
				want, wantLate, wantState := jModel(kind, left, right, delay.Milliseconds(), b[0].Milliseconds(), b[1].Milliseconds())
				got := jRows(sink.All(), kind == LeftSemi)
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("output differs from the model\ngot  %d:\n%s\nwant %d:\n%s", len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
				}
				t.Logf("%d rows, %d late, %d in state at the end, %d batches", len(want), wantLate, wantState, len(progress))
				late := int64(0)
				for _, p := range progress {
					late += p.StateOperators[0].NumRowsDroppedByWatermark
				}
				if late != wantLate {
					t.Errorf("late rows: got %d, want %d", late, wantLate)
				}
				last := progress[len(progress)-1].StateOperators[0]
				if last.NumRowsTotal != wantState {
					t.Errorf("rows in state at the end: got %d, want %d", last.NumRowsTotal, wantState)
				}
			})
		}
	}
}

// TestStreamJoinRestartEqualsOneRun stops a full outer join twice midway and
// restarts it on its checkpoint: the output is the one of an uninterrupted
// run (the crash tests in tests/ pin re-runs of one batch byte for byte).
func TestStreamJoinRestartEqualsOneRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	left, right := jScript(rng, 12)
	run := func(stops []int) *memsink.Sink {
		l, r := newJSource("l", left), newJSource("r", right)
		sink := memsink.New("out")
		cp := localStore(t)
		for _, stop := range stops {
			l.limit.Store(int64(stop))
			r.limit.Store(int64(stop))
			stream := joinStream(l, r, FullOuter, 5*time.Second, -5*time.Second, 10*time.Second)
			if _, err := runQuery(t, stream, WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(3)); err != nil {
				t.Fatal(err)
			}
		}
		return sink
	}
	one := run([]int{len(left)})
	three := run([]int{3, 7, len(left)})
	// A stop adds a batch that only evicts (the watermark moved), so the
	// batch ids shift; the rows, each once, are the same.
	a, b := jRows(one.All(), false), jRows(three.All(), false)
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Fatalf("output differs:\none run  %v\nrestarts %v", a, b)
	}
	if len(a) == 0 {
		t.Fatal("no output")
	}
	for _, s := range []*memsink.Sink{one, three} {
		if r := s.Repeats(); len(r) > 0 {
			t.Fatalf("batches added twice: %v", r)
		}
	}
}

// TestStreamJoinRules pins Spark's rules: an outer join needs a range and a
// watermark on both sides; an inner join without them runs, with a warning
// in the plan.
func TestStreamJoinRules(t *testing.T) {
	l, r := newJSource("l", [][]jRow{{{"a", 1, 1}}}), newJSource("r", [][]jRow{{{"a", 2, 2}}})
	_, err := NewQuery(ReadStream(l).Join(ReadStream(r), LeftOuter, On("key", "key")).Stream, WithCheckpoint(localStore(t)), WithSink(memsink.New("o")))
	if err == nil || !strings.Contains(err.Error(), "needs a range condition") {
		t.Fatalf("outer join without range: %v", err)
	}
	_, err = NewQuery(ReadStream(l).Join(ReadStream(r), Inner, On("key", "id")).Stream, WithCheckpoint(localStore(t)), WithSink(memsink.New("o")))
	if err == nil || !strings.Contains(err.Error(), "need one type") {
		t.Fatalf("keys of two types: %v", err)
	}
	s := ReadStream(l).Join(ReadStream(r), Inner, On("key", "key")).Stream
	q, err := NewQuery(s, WithCheckpoint(localStore(t)), WithSink(memsink.New("o")))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := q.Describe()
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Warnings) != 1 || !strings.Contains(plan.Warnings[0], "grows without bound") {
		t.Fatalf("plan of an unbounded join: %s", plan)
	}
	sink := memsink.New("o")
	if _, err := runQuery(t, s, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow())); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(sink.All()); !strings.Contains(got, "a") || len(sink.All()) != 1 {
		t.Fatalf("unbounded inner join: %s", got)
	}
	if names := sink.Schema().String(); !strings.Contains(names, "left_key") || !strings.Contains(names, "right_id") {
		t.Fatalf("clashing names are not qualified: %s", names)
	}
}

// TestStreamJoinAfterDedup runs a join as the chain's second operator,
// behind a deduplication of its left side: the left rows come through the
// chain, the right side's straight from its sources, both late by the
// previous batch's watermark; the output and the rows left in state match
// the model.
func TestStreamJoinAfterDedup(t *testing.T) {
	for seed := range 4 {
		for _, kind := range []JoinKind{Inner, LeftOuter, FullOuter, LeftSemi} {
			t.Run(fmt.Sprintf("%s/seed%d", kind, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(seed), 99))
				left, right := jScript(rng, 8)
				delay := 5 * time.Second
				lower, upper := -5*time.Second, 10*time.Second
				sink := memsink.New("out")
				var progress []Progress
				rs := ReadStream(newJSource("r", right)).WithWatermark("ts", delay)
				stream := ReadStream(newJSource("l", left)).WithWatermark("ts", delay).
					DropDuplicates("key", "ts", "id").ID("dedup").
					Join(rs, kind, On("key", "key"), Within("ts", "ts", lower, upper)).ID("j")
				_, err := runQuery(t, stream, WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(3),
					WithProgressListener(func(p Progress) { progress = append(progress, p) }))
				if err != nil {
					t.Fatal(err)
				}
				want, _, wantState := jModelChained(kind, left, right, delay.Milliseconds(), lower.Milliseconds(), upper.Milliseconds(), true)
				got := jRows(sink.All(), kind == LeftSemi)
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("output differs from the model\ngot  %d:\n%s\nwant %d:\n%s", len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
				}
				last := progress[len(progress)-1].StateOperators[1]
				if last.NumRowsTotal != wantState {
					t.Errorf("rows in the join's state at the end: got %d, want %d", last.NumRowsTotal, wantState)
				}
			})
		}
	}
}

// TestJoinsReleaseWhatTheyAllocate runs each kind of join under a checked
// allocator: after the query and its release, nothing is left allocated.
func TestJoinsReleaseWhatTheyAllocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	left, right := jScript(rng, 6)
	stream, table := tScript(rng, 6)
	st := &memStatic{}
	st.add([2]string{"a", "x"}, [2]string{"b", "y"}, [2]string{"b", "z"})
	streams := map[string]func() *Stream{
		"stream-stream": func() *Stream {
			return joinStream(newJSource("l", left), newJSource("r", right), FullOuter, 5*time.Second, -5*time.Second, 10*time.Second)
		},
		"stream-table": func() *Stream { return tableStream(newJSource("s", stream), newTSource(table), LeftOuter) },
		"stream-static": func() *Stream {
			return ReadStream(newJSource("s", stream)).JoinStatic(st, LeftOuter, EveryBatch, On("key", "key")).ID("st")
		},
	}
	for name, mk := range streams {
		t.Run(name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			cp := localStore(t)
			sink := memsink.New("out")
			for range 2 { // the second run loads the state the first left
				if _, err := runQuery(t, mk(), WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(2), WithAllocator(mem)); err != nil {
					t.Fatal(err)
				}
			}
			if len(sink.All()) == 0 {
				t.Fatal("no output")
			}
			mem.AssertSize(t, 0)
		})
	}
}
