package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/offsetlog"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("time zone %s not available: %v", name, err)
	}
	return loc
}

func TestCronNext(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	cases := []struct {
		name, expr string
		loc        *time.Location
		after      string // in loc, "2006-01-02 15:04"
		want       []string
	}{
		{"every minute", "* * * * *", time.UTC, "2026-01-01 10:00", []string{"2026-01-01 10:01", "2026-01-01 10:02"}},
		{"step and list", "*/20 9,17 * * *", time.UTC, "2026-01-01 09:30", []string{"2026-01-01 09:40", "2026-01-01 17:00", "2026-01-01 17:20", "2026-01-01 17:40", "2026-01-02 09:00"}},
		{"range with step", "0 8-18/5 * * *", time.UTC, "2026-01-01 00:00", []string{"2026-01-01 08:00", "2026-01-01 13:00", "2026-01-01 18:00", "2026-01-02 08:00"}},
		{"a/n runs to the max", "0 20/2 * * *", time.UTC, "2026-01-01 00:00", []string{"2026-01-01 20:00", "2026-01-01 22:00", "2026-01-02 20:00"}},
		{"names", "0 6 * jan,FEB mon-fri", time.UTC, "2026-01-30 07:00", []string{"2026-02-02 06:00", "2026-02-03 06:00"}},
		{"month end: 31st skips short months", "0 0 31 * *", time.UTC, "2026-01-31 00:00", []string{"2026-03-31 00:00", "2026-05-31 00:00", "2026-07-31 00:00", "2026-08-31 00:00"}},
		{"leap day", "0 0 29 2 *", time.UTC, "2026-01-01 00:00", []string{"2028-02-29 00:00", "2032-02-29 00:00"}},
		{"dom or dow when both restricted", "0 0 13 * fri", time.UTC, "2026-02-01 00:00", []string{"2026-02-06 00:00", "2026-02-13 00:00", "2026-02-20 00:00", "2026-02-27 00:00", "2026-03-06 00:00"}},
		{"dow with star dom is and", "0 0 * * 5", time.UTC, "2026-02-01 00:00", []string{"2026-02-06 00:00", "2026-02-13 00:00"}},
		{"dom step counts as star", "0 0 */10 * 1", time.UTC, "2026-02-01 00:00", []string{"2026-05-11 00:00", "2026-06-01 00:00"}},
		{"sunday as 7", "0 12 * * 7", time.UTC, "2026-02-01 12:00", []string{"2026-02-08 12:00"}},
		{"hourly", "@hourly", time.UTC, "2026-01-01 10:59", []string{"2026-01-01 11:00", "2026-01-01 12:00"}},
		{"monthly", "@monthly", time.UTC, "2026-01-15 00:00", []string{"2026-02-01 00:00", "2026-03-01 00:00"}},
		{"weekly", "@weekly", time.UTC, "2026-02-01 00:00", []string{"2026-02-08 00:00"}},
		{"tz prefix", "TZ=America/New_York 0 9 * * *", nil, "2026-01-01 09:00", []string{"2026-01-02 09:00"}},
		// 2026-03-08 02:00 EST jumps to 03:00 EDT.
		{"spring gap fires at the gap's end", "30 2 * * *", ny, "2026-03-07 03:00", []string{"2026-03-08 03:00", "2026-03-09 02:30"}},
		{"spring gap, hour star follows real time", "30 * * * *", ny, "2026-03-08 01:00", []string{"2026-03-08 01:30", "2026-03-08 03:30"}},
		{"spring gap, time after the gap", "15 3 * * *", ny, "2026-03-07 04:00", []string{"2026-03-08 03:15"}},
		// 2026-11-01 02:00 EDT falls back to 01:00 EST.
		{"fall back fires once", "30 1 * * *", ny, "2026-10-31 02:00", []string{"2026-11-01 01:30 EDT", "2026-11-02 01:30"}},
		{"fall back, hour star fires twice", "30 * * * *", ny, "2026-11-01 00:45", []string{"2026-11-01 01:30 EDT", "2026-11-01 01:30 EST", "2026-11-01 02:30"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []CronOption
			loc := tc.loc
			if loc != nil {
				opts = append(opts, WithCronLocation(loc))
			} else {
				loc = ny
			}
			s, err := ParseCron(tc.expr, opts...)
			if err != nil {
				t.Fatal(err)
			}
			at, err := time.ParseInLocation("2006-01-02 15:04", tc.after, loc)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				at = s.Next(at)
				got := at.In(loc).Format("2006-01-02 15:04")
				if strings.Contains(w, " E") { // a zone abbreviation tells the occurrence apart
					got = at.In(loc).Format("2006-01-02 15:04 MST")
				}
				if got != w {
					t.Fatalf("%s: next %s, want %s", tc.expr, got, w)
				}
			}
		})
	}
}

func TestCronParseErrors(t *testing.T) {
	cases := []struct{ expr, want string }{
		{"* * * *", "has 4 fields"},
		{"60 * * * *", `minute field "60": 60 is out of range 0-59`},
		{"* 24 * * *", `hour field "24"`},
		{"* * 0 * *", `day-of-month field "0"`},
		{"* * * foo *", `month field "foo": "foo" is neither a number nor a name (JAN…)`},
		{"* * * * 8", `day-of-week field "8"`},
		{"*/0 * * * *", `step "0" is not a positive number`},
		{"5-1 * * * *", "runs backwards"},
		{"1,,2 * * * *", "empty list element"},
		{"@often", "unknown macro"},
		{"TZ=Mars/Olympus 0 0 * * *", `time zone "Mars/Olympus"`},
		{"0 0 30 2 *", "never fires"},
		{"0 0 31 4,6 *", "never fires"},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			_, err := ParseCron(tc.expr)
			if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseCron(%q) = %v, want an error containing %q", tc.expr, err, tc.want)
			}
		})
	}
	// Feb 30 with a restricted day of week is possible (OR).
	if _, err := ParseCron("0 0 30 2 mon"); err != nil {
		t.Fatal(err)
	}
}

func TestEverySchedule(t *testing.T) {
	s := EverySchedule(15 * time.Minute)
	at := time.Date(2026, 1, 1, 10, 7, 30, 0, time.UTC)
	for _, w := range []string{"10:15:00", "10:30:00", "10:45:00", "11:00:00"} {
		at = s.Next(at)
		if got := at.Format("15:04:05"); got != w {
			t.Fatalf("next %s, want %s", got, w)
		}
	}
	// Strictly after: a tick time gives the following tick.
	if got := s.Next(time.Date(2026, 1, 1, 10, 15, 0, 0, time.UTC)); !got.Equal(time.Date(2026, 1, 1, 10, 30, 0, 0, time.UTC)) {
		t.Fatalf("next after a tick: %s", got)
	}
	if s.String() != "every 15m0s" {
		t.Fatalf("String %q", s.String())
	}
}

// availNowSeq is a seqSource that supports AvailableNow: a pass takes only
// what was available when it started.
type availNowSeq struct {
	*seqSource
	cap atomic.Int64
}

func (s *availNowSeq) PrepareAvailableNow(context.Context) error {
	s.cap.Store(s.avail.Load())
	return nil
}

func (s *availNowSeq) LatestOffset(ctx context.Context, start json.RawMessage) (json.RawMessage, error) {
	end, err := s.seqSource.LatestOffset(ctx, start)
	if err != nil {
		return nil, err
	}
	n, _ := strconv.ParseInt(string(end), 10, 64)
	s0, _ := strconv.ParseInt(string(start), 10, 64)
	return json.RawMessage(strconv.FormatInt(max(min(n, s.cap.Load()), s0), 10)), nil
}

// slowSink sleeps in AddBatch and records when each batch ran.
type slowSink struct {
	*memsink.Sink
	delay func(id int64) time.Duration
	mu    sync.Mutex
	spans map[int64][2]time.Time
}

func (s *slowSink) AddBatch(ctx context.Context, id int64, sc *arrow.Schema, recs []arrow.RecordBatch) error {
	start := time.Now()
	if d := s.delay(id); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := s.Sink.AddBatch(ctx, id, sc, recs)
	s.mu.Lock()
	s.spans[id] = [2]time.Time{start, time.Now()}
	s.mu.Unlock()
	return err
}

func TestScheduledQueryRunsPassesAtTicks(t *testing.T) {
	const tick = 50 * time.Millisecond
	cp := localStore(t)
	src := &availNowSeq{seqSource: newSeq(10, 0, 3)}
	sink := &slowSink{Sink: memsink.New("out"), spans: map[int64][2]time.Time{}, delay: func(id int64) time.Duration {
		if id == 1 {
			return 3 * tick // the second pass overruns several ticks
		}
		return 0
	}}
	var q *Query
	var passes []int64 // end offset after each batch
	q, err := NewQuery(ReadStream(src), WithCheckpoint(cp), WithSink(sink), WithTrigger(Scheduled(EverySchedule(tick))),
		WithProgressListener(func(p Progress) {
			passes = append(passes, p.BatchID)
			// New data arrives after each pass; the next tick takes it.
			src.avail.Add(10)
			if p.BatchID == 3 {
				q.Stop()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}
	// One batch per pass (no per-trigger limit), each with the 10 new rows.
	ids := sink.BatchIDs()
	if len(ids) != 4 {
		t.Fatalf("batches %v, want 4 passes of one batch", ids)
	}
	for _, id := range ids {
		if n := len(sink.Batch(id)); n != 10 {
			t.Errorf("batch %d has %d rows, want 10 (the data new at its tick)", id, n)
		}
	}
	// Passes start at ticks and never overlap: batch 2 starts after batch
	// 1 ended, at a tick boundary (not immediately for the ticks missed).
	for id := int64(1); id < 4; id++ {
		prev, cur := sink.spans[id-1], sink.spans[id]
		if cur[0].Before(prev[1]) {
			t.Errorf("batch %d started at %s before batch %d ended at %s", id, cur[0].Format("05.000"), id-1, prev[1].Format("05.000"))
		}
	}
	plans, _ := offsetlog.New[OffsetsEntry](cp, offsetsDir).List(ctx)
	for _, id := range plans {
		e, err := offsetlog.New[OffsetsEntry](cp, offsetsDir).Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		// Batch timestamps are tick instants (the planner's clock just
		// after a tick), so consecutive batches lie in different ticks.
		if id > 0 {
			p, _ := offsetlog.New[OffsetsEntry](cp, offsetsDir).Get(ctx, id-1)
			if e.TimestampMs/tick.Milliseconds() == p.TimestampMs/tick.Milliseconds() {
				t.Errorf("batches %d and %d planned in the same tick", id-1, id)
			}
		}
	}
	// Batch 1 overran 3 ticks; the ticks it covered are skipped (one
	// pass, batch 2, follows), and batch 2 is planned after batch 1 ended,
	// without waiting for more than a late tick (generous: shared CI).
	p2, err := offsetlog.New[OffsetsEntry](cp, offsetsDir).Get(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if planned := time.UnixMilli(p2.TimestampMs); planned.Before(sink.spans[1][1].Truncate(time.Millisecond)) {
		t.Errorf("batch 2 planned at %s, before batch 1 ended at %s", planned.Format("05.000"), sink.spans[1][1].Format("05.000"))
	}
	if gap := sink.spans[2][0].Sub(sink.spans[1][1]); gap > time.Second {
		t.Errorf("pass after the overrun started %s after it, want about a tick", gap)
	}
}

func TestParseSchedule(t *testing.T) {
	cases := []struct{ spec, want, err string }{
		{"@every 15m", "every 15m0s", ""},
		{"@every -1s", "", "not a positive duration"},
		{"@every soon", "", `"soon" is not a positive duration`},
		{"TZ=UTC 0 2 * * *", "cron TZ=UTC 0 2 * * *", ""},
		{"@daily", "cron @daily", ""},
		{"0 2 * *", "", "has 4 fields"},
	}
	for _, tc := range cases {
		s, err := ParseSchedule(tc.spec)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseSchedule(%q) error %v, want %q", tc.spec, err, tc.err)
		case tc.err == "" && (err != nil || s.String() != tc.want):
			t.Errorf("ParseSchedule(%q) = %v, %v; want %s", tc.spec, s, err, tc.want)
		}
	}
}
