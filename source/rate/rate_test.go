package rate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type row struct {
	ts     int64
	value  int64
	part   int32
	key    string
	amount int64
}

func readRows(t *testing.T, s *Source, from, to int64) ([]row, []int64) {
	t.Helper()
	var rows []row
	var sizes []int64
	err := s.Read(context.Background(), EncodeOffset(from), EncodeOffset(to), func(rec arrow.RecordBatch) error {
		if !rec.Schema().Equal(s.Schema()) {
			t.Fatalf("record schema %v, want %v", rec.Schema(), s.Schema())
		}
		sizes = append(sizes, rec.NumRows())
		ts := rec.Column(0).(*array.Timestamp)
		v := rec.Column(1).(*array.Int64)
		p := rec.Column(2).(*array.Int32)
		k := rec.Column(3).(*array.String)
		a := rec.Column(4).(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			rows = append(rows, row{int64(ts.Value(i)), v.Value(i), p.Value(i), k.Value(i), a.Value(i)})
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read [%d,%d): %v", from, to, err)
	}
	return rows, sizes
}

func TestReadIsAFunctionOfTheOffset(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	s, err := New(WithAllocator(mem), WithRowsPerSecond(3), WithPartitions(4), WithKeys(7), WithStartTime(start), WithBatchSize(5))
	if err != nil {
		t.Fatal(err)
	}
	first, sizes := readRows(t, s, 10, 22)
	if fmt.Sprint(sizes) != "[5 5 2]" {
		t.Errorf("record sizes %v, want [5 5 2]", sizes)
	}
	again, _ := readRows(t, s, 10, 22)
	if fmt.Sprint(first) != fmt.Sprint(again) {
		t.Fatalf("two reads of one range differ:\n%v\n%v", first, again)
	}
	// A second source with the same options, and sub-ranges, agree.
	s2, _ := New(WithAllocator(mem), WithRowsPerSecond(3), WithPartitions(4), WithKeys(7), WithStartTime(start))
	a, _ := readRows(t, s2, 10, 15)
	b, _ := readRows(t, s2, 15, 22)
	if fmt.Sprint(append(a, b...)) != fmt.Sprint(first) {
		t.Fatalf("split reads differ from one read")
	}
	for i, r := range first {
		o := int64(10 + i)
		wantTS := start.Add(time.Duration(o) * time.Second / 3).Truncate(time.Microsecond).UnixMicro()
		want := row{wantTS, o, int32(o % 4), fmt.Sprintf("k-%d", o%7), Amount(o)}
		if r != want {
			t.Errorf("offset %d: got %+v, want %+v", o, r, want)
		}
		if r.amount < 1 || r.amount > 100000 {
			t.Errorf("offset %d: amount %d out of [1,100000]", o, r.amount)
		}
	}
	if rows, _ := readRows(t, s, 7, 7); len(rows) != 0 {
		t.Errorf("empty range gave %d rows", len(rows))
	}
}

func TestDefaultStartTimeIsFixed(t *testing.T) {
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := readRows(t, s, 0, 2)
	if want := DefaultStartTime().UnixMicro(); rows[0].ts != want || rows[1].ts != want+1000 {
		t.Fatalf("timestamps %d %d, want %d and +1000us", rows[0].ts, rows[1].ts, want)
	}
}

func TestLatestOffset(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		advance time.Duration
		prepare bool // PrepareAvailableNow before LatestOffset
		start   int64
		want    int64
	}
	tests := []struct {
		name  string
		opts  []Option
		steps []step
	}{
		{"clock paced", []Option{WithRowsPerSecond(10)}, []step{
			{0, false, 0, 0},
			{500 * time.Millisecond, false, 0, 5},
			{time.Second, false, 5, 15},
			{0, false, 15, 15},
		}},
		{"resumes after restart offset", []Option{WithRowsPerSecond(10)}, []step{
			{2 * time.Second, false, 1000, 1020},
		}},
		{"capped per trigger", []Option{WithRowsPerSecond(10), WithMaxRowsPerTrigger(4)}, []step{
			{2 * time.Second, false, 0, 4},
			{0, false, 4, 8},
			{0, false, 16, 20},
			{0, false, 20, 20},
		}},
		{"available now freezes the clock", []Option{WithRowsPerSecond(10), WithMaxRowsPerTrigger(4)}, []step{
			{time.Second, true, 0, 4},
			{time.Hour, false, 4, 8},
			{time.Hour, false, 8, 10},
			{time.Hour, false, 10, 10},
		}},
		{"unbounded ignores the clock", []Option{WithRowsPerSecond(10), WithUnbounded(), WithMaxRowsPerTrigger(1000)}, []step{
			{0, false, 0, 1000},
			{0, false, 1000, 2000},
		}},
		{"unbounded available now gives one more trigger", []Option{WithUnbounded(), WithMaxRowsPerTrigger(7)}, []step{
			{0, false, 0, 7},
			{0, true, 7, 14},
			{0, false, 14, 14},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{now: t0}
			s, err := New(append(tc.opts, WithClock(clk.Now))...)
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tc.steps {
				clk.Advance(st.advance)
				if st.prepare {
					if err := s.PrepareAvailableNow(ctx); err != nil {
						t.Fatal(err)
					}
				}
				got, err := s.LatestOffset(ctx, EncodeOffset(st.start))
				if err != nil {
					t.Fatal(err)
				}
				if want := EncodeOffset(st.want); string(got) != string(want) {
					t.Fatalf("step %d: LatestOffset(%d) = %s, want %s", i, st.start, got, want)
				}
			}
		})
	}
}

func TestOffsets(t *testing.T) {
	s, _ := New()
	off, _ := s.InitialOffset(context.Background())
	if string(off) != `{"rows":0}` {
		t.Fatalf("initial offset %s", off)
	}
	for _, bad := range []string{`{}`, `{"rows":-1}`, `nope`, `{"rows":"1"}`} {
		if _, err := s.LatestOffset(context.Background(), json.RawMessage(bad)); !errors.Is(err, ErrBadOffset) {
			t.Errorf("offset %s: err %v, want ErrBadOffset", bad, err)
		}
	}
	err := s.Read(context.Background(), EncodeOffset(5), EncodeOffset(4), func(arrow.RecordBatch) error { return nil })
	if !errors.Is(err, ErrBadOffset) {
		t.Errorf("reversed range: err %v, want ErrBadOffset", err)
	}
	if _, err := New(WithRowsPerSecond(0), WithPartitions(-1)); !errors.Is(err, ErrBadOption) {
		t.Errorf("bad options: err %v", err)
	}
}

func TestEmitErrorStopsRead(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, _ := New(WithAllocator(mem), WithBatchSize(10))
	boom := errors.New("boom")
	calls := 0
	err := s.Read(context.Background(), EncodeOffset(0), EncodeOffset(100), func(arrow.RecordBatch) error {
		calls++
		return boom
	})
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("err %v after %d calls, want boom after 1", err, calls)
	}
}

// BenchmarkRead measures rows generated per second.
func BenchmarkRead(b *testing.B) {
	s, _ := New()
	const n = 1 << 20
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Read(context.Background(), EncodeOffset(0), EncodeOffset(n), func(arrow.RecordBatch) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
