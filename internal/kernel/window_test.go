package kernel

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
)

// winRecord is a record (id int64, ts timestamp[unit]) with the given
// times; a nil entry is a null time.
func winRecord(mem memory.Allocator, unit arrow.TimeUnit, times ...*int64) arrow.RecordBatch {
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: &arrow.TimestampType{Unit: unit, TimeZone: "UTC"}, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, sch)
	defer b.Release()
	for i, t := range times {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if t == nil {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(*t))
		}
	}
	return b.NewRecordBatch()
}

func at(v int64) *int64 { return &v }

// winRows renders the assigner's output as "id:start-end" per row.
func winRows(rec arrow.RecordBatch) []string {
	ids := rec.Column(0).(*array.Int64)
	st := rec.Column(2).(*array.Timestamp)
	en := rec.Column(3).(*array.Timestamp)
	out := make([]string, rec.NumRows())
	for i := range out {
		out[i] = fmt.Sprintf("%d:%d-%d", ids.Value(i), st.Value(i), en.Value(i))
	}
	return out
}

// winModel is the windows of time t by their definition: every
// [k·slide, k·slide+size) holding t, oldest first, found by scanning every
// start from below t-size (no floor division, no shortcut).
func winModel(t, size, slide int64) [][2]int64 {
	var out [][2]int64
	k := (t-size)/slide - 2
	for s := k * slide; s <= t; s += slide {
		if s <= t && t < s+size {
			out = append(out, [2]int64{s, s + size})
		}
	}
	return out
}

func TestWindowAssignerKnownWindows(t *testing.T) {
	for _, tc := range []struct {
		name        string
		unit        arrow.TimeUnit
		size, slide time.Duration
		times       []*int64
		want        []string
	}{
		{"tumbling", arrow.Second, 10 * time.Second, 10 * time.Second,
			[]*int64{at(0), at(9), at(10), at(25)},
			[]string{"0:0-10", "1:0-10", "2:10-20", "3:20-30"}},
		{"tumbling before 1970", arrow.Second, 10 * time.Second, 10 * time.Second,
			[]*int64{at(-1), at(-10), at(-11)},
			[]string{"0:-10-0", "1:-10-0", "2:-20--10"}},
		{"tumbling, end is exclusive", arrow.Millisecond, time.Second, time.Second,
			[]*int64{at(999), at(1000), at(-1000), at(-1001)},
			[]string{"0:0-1000", "1:1000-2000", "2:-1000-0", "3:-2000--1000"}},
		{"sliding, slide divides size", arrow.Second, 10 * time.Second, 5 * time.Second,
			[]*int64{at(0), at(7), at(-3)},
			[]string{"0:-5-5", "0:0-10", "1:0-10", "1:5-15", "2:-10-0", "2:-5-5"}},
		{"sliding, slide does not divide size", arrow.Second, 10 * time.Second, 4 * time.Second,
			[]*int64{at(0), at(2), at(9), at(-1)},
			[]string{
				"0:-8-2", "0:-4-6", "0:0-10",
				"1:-4-6", "1:0-10",
				"2:0-10", "2:4-14", "2:8-18",
				"3:-8-2", "3:-4-6",
			}},
		{"sliding, a time on a window's start and another's end", arrow.Second, 6 * time.Second, 3 * time.Second,
			[]*int64{at(6)},
			[]string{"0:3-9", "0:6-12"}},
		{"microseconds", arrow.Microsecond, time.Minute, time.Minute,
			[]*int64{at(59_999_999), at(60_000_000)},
			[]string{"0:0-60000000", "1:60000000-120000000"}},
		{"nanoseconds", arrow.Nanosecond, 2 * time.Nanosecond, time.Nanosecond,
			[]*int64{at(0)},
			[]string{"0:-1-1", "0:0-2"}},
		{"no rows", arrow.Second, time.Second, time.Second, nil, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rec := winRecord(mem, tc.unit, tc.times...)
			defer rec.Release()
			w, err := NewWindowAssigner(mem, rec.Schema(), "ts", tc.size, tc.slide)
			if err != nil {
				t.Fatal(err)
			}
			out, err := w.Apply(context.Background(), rec)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Release()
			if !out.Schema().Equal(w.Schema()) {
				t.Errorf("output schema %s, want %s", out.Schema(), w.Schema())
			}
			if got := winRows(out); !slices.Equal(got, tc.want) {
				t.Errorf("windows %v, want %v", got, tc.want)
			}
		})
	}
}

// TestWindowAssignerMatchesDefinition compares Apply with winModel over
// random times around zero and sizes whose slide does and does not divide
// them.
func TestWindowAssignerMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, sz := range [][2]int64{{1, 1}, {5, 5}, {10, 3}, {10, 4}, {9, 2}, {7, 7}, {60, 7}, {12, 5}} {
		size, slide := sz[0], sz[1]
		var times []*int64
		for range 300 {
			times = append(times, at(rng.Int64N(400)-200))
		}
		times = append(times, at(0), at(size), at(-size), at(slide), at(-slide))
		rec := winRecord(mem, arrow.Second, times...)
		w, err := NewWindowAssigner(mem, rec.Schema(), "ts", time.Duration(size)*time.Second, time.Duration(slide)*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		out, err := w.Apply(context.Background(), rec)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i, tm := range times {
			for _, win := range winModel(*tm, size, slide) {
				want = append(want, fmt.Sprintf("%d:%d-%d", i, win[0], win[1]))
			}
		}
		if got := winRows(out); !slices.Equal(got, want) {
			t.Errorf("size %d slide %d: got %d window rows, want %d; first difference at %d", size, slide, len(got), len(want), firstDiff(got, want))
		}
		out.Release()
		rec.Release()
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestWindowAssignerKeepsColumns checks that the input columns are carried
// through: as they are for tumbling windows, repeated per window for
// sliding ones.
func TestWindowAssignerKeepsColumns(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := winRecord(mem, arrow.Second, at(1), at(4))
	defer rec.Release()
	for _, slide := range []time.Duration{4 * time.Second, 2 * time.Second} {
		w, err := NewWindowAssigner(mem, rec.Schema(), "ts", 4*time.Second, slide)
		if err != nil {
			t.Fatal(err)
		}
		out, err := w.Apply(context.Background(), rec)
		if err != nil {
			t.Fatal(err)
		}
		ts := out.Column(1).(*array.Timestamp)
		for i := range int(out.NumRows()) {
			id := out.Column(0).(*array.Int64).Value(i)
			if want := rec.Column(1).(*array.Timestamp).Value(int(id)); ts.Value(i) != want {
				t.Errorf("slide %s: row %d (id %d) has time %d, want %d", slide, i, id, ts.Value(i), want)
			}
		}
		if slide == 4*time.Second && out.Column(0) != rec.Column(0) {
			t.Errorf("tumbling windows copied the input columns instead of carrying them")
		}
		out.Release()
	}
}

// A null event time fails the batch naming the column and row; the
// assigner never drops such a row.
func TestWindowAssignerNullTime(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := winRecord(mem, arrow.Second, at(1), nil, at(3))
	defer rec.Release()
	for _, slide := range []time.Duration{10 * time.Second, 5 * time.Second} {
		w, err := NewWindowAssigner(mem, rec.Schema(), "ts", 10*time.Second, slide)
		if err != nil {
			t.Fatal(err)
		}
		out, err := w.Apply(context.Background(), rec)
		if err == nil {
			out.Release()
			t.Fatalf("slide %s: a null event time was assigned a window", slide)
		}
		if msg := err.Error(); !strings.Contains(msg, `"ts"`) || !strings.Contains(msg, "row 1") || !strings.Contains(msg, "null") {
			t.Errorf("slide %s: error %q does not name the column, the row and the null", slide, msg)
		}
	}
}

func TestNewWindowAssignerErrors(t *testing.T) {
	mem := memory.NewGoAllocator()
	rec := winRecord(mem, arrow.Millisecond, at(1))
	defer rec.Release()
	withWindow := arrow.NewSchema(append(rec.Schema().Fields(), arrow.Field{Name: batch.WindowStart, Type: arrow.PrimitiveTypes.Int64}), nil)
	for _, tc := range []struct {
		name        string
		sch         *arrow.Schema
		col         string
		size, slide time.Duration
		want        string
	}{
		{"missing column", rec.Schema(), "nope", time.Second, time.Second, `"nope" is not a column`},
		{"not a timestamp", rec.Schema(), "id", time.Second, time.Second, "not a timestamp"},
		{"zero size", rec.Schema(), "ts", 0, 0, "must be positive"},
		{"negative slide", rec.Schema(), "ts", time.Second, -time.Second, "must be positive"},
		{"slide above size", rec.Schema(), "ts", time.Second, 2 * time.Second, "slide <= size"},
		{"finer than the unit", rec.Schema(), "ts", time.Second + time.Microsecond, time.Second, "finer than the column's unit"},
		{"window columns exist", withWindow, "ts", time.Second, time.Second, "already has a window_start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewWindowAssigner(mem, tc.sch, tc.col, tc.size, tc.slide)
			if !errors.Is(err, batch.ErrWindow) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want batch.ErrWindow saying %q", err, tc.want)
			}
		})
	}
}

func TestTimestampMillisFloors(t *testing.T) {
	for _, tc := range []struct {
		v    int64
		unit arrow.TimeUnit
		want int64
	}{
		{3, arrow.Second, 3000},
		{-3, arrow.Second, -3000},
		{1234, arrow.Millisecond, 1234},
		{-1234, arrow.Millisecond, -1234},
		{1999, arrow.Microsecond, 1},
		{-1, arrow.Microsecond, -1},
		{-1000, arrow.Microsecond, -1},
		{-1001, arrow.Microsecond, -2},
		{999_999, arrow.Nanosecond, 0},
		{-1, arrow.Nanosecond, -1},
		{0, arrow.Nanosecond, 0},
	} {
		if got := TimestampMillis(tc.v, tc.unit); got != tc.want {
			t.Errorf("TimestampMillis(%d, %s) = %d, want %d", tc.v, tc.unit, got, tc.want)
		}
	}
}

func TestEventTimesMillis(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := winRecord(mem, arrow.Microsecond, at(-1), nil, at(2500))
	defer rec.Release()
	ms, valid, err := EventTimesMillis(rec, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ms[:1], []int64{-1}) || ms[2] != 2 || !slices.Equal(valid, []bool{true, false, true}) {
		t.Errorf("EventTimesMillis = %v, %v; want [-1 _ 2], [true false true]", ms, valid)
	}
	if _, _, err := EventTimesMillis(rec, 0); err == nil || !strings.Contains(err.Error(), `"id"`) {
		t.Errorf("an int64 column as event time: error %v, want one naming the column", err)
	}
}

func TestFilterRows(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := winRecord(mem, arrow.Second, at(1), at(2), at(3))
	defer rec.Release()
	all, err := FilterRows(context.Background(), mem, rec, []bool{true, true, true})
	if err != nil {
		t.Fatal(err)
	}
	if all != rec {
		t.Errorf("keeping every row copied the record")
	}
	all.Release()
	some, err := FilterRows(context.Background(), mem, rec, []bool{false, true, false})
	if err != nil {
		t.Fatal(err)
	}
	defer some.Release()
	if some.NumRows() != 1 || some.Column(0).(*array.Int64).Value(0) != 1 {
		t.Errorf("kept rows %v, want the row of id 1", some)
	}
}
