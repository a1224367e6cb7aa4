package pace

import (
	"testing"
	"time"
)

func TestReach(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := New(10, func() time.Time { return now })
	type step struct {
		advance time.Duration
		freeze  bool
		start   int64
		want    int64
	}
	for i, st := range []step{
		{0, false, 100, 100}, // anchored at the first start
		{500 * time.Millisecond, false, 100, 105},
		{time.Second, false, 0, 115}, // later starts do not move the anchor
		{0, true, 115, 115},          // frozen now
		{time.Hour, false, 115, 115}, // the clock goes on, the reach does not
	} {
		now = now.Add(st.advance)
		if st.freeze {
			p.Freeze()
		}
		if got := p.Reach(st.start); got != st.want {
			t.Fatalf("step %d: Reach(%d) = %d, want %d", i, st.start, got, st.want)
		}
	}
	if !p.Frozen() {
		t.Fatal("not frozen")
	}
}

func TestItemsIn(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		rate int64
		want int64
	}{
		{-time.Second, 10, 0},
		{0, 10, 0},
		{99 * time.Millisecond, 10, 0},
		{100 * time.Millisecond, 10, 1},
		{3*time.Second + 250*time.Millisecond, 1000, 3250},
		{1<<62 - 1, 1_000_000_000, 1<<62 - 1}, // one per nanosecond, no overflow
	} {
		if got := ItemsIn(tc.d, tc.rate); got != tc.want {
			t.Errorf("ItemsIn(%v, %d) = %d, want %d", tc.d, tc.rate, got, tc.want)
		}
	}
}
