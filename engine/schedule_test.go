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

	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/cron"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/offsetlog"
)

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
	q, err := NewQuery(ReadStream(src), WithCheckpoint(cp), WithSink(sink), WithTrigger(Scheduled(cron.Every(tick))),
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
	plans, _ := offsetlog.New[OffsetsEntry](cp, checkpoint.OffsetsDir).List(ctx)
	for _, id := range plans {
		e, err := offsetlog.New[OffsetsEntry](cp, checkpoint.OffsetsDir).Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		// Batch timestamps are tick instants (the planner's clock just
		// after a tick), so consecutive batches lie in different ticks.
		if id > 0 {
			p, _ := offsetlog.New[OffsetsEntry](cp, checkpoint.OffsetsDir).Get(ctx, id-1)
			if e.TimestampMs/tick.Milliseconds() == p.TimestampMs/tick.Milliseconds() {
				t.Errorf("batches %d and %d planned in the same tick", id-1, id)
			}
		}
	}
	// Batch 1 overran 3 ticks; the ticks it covered are skipped (one
	// pass, batch 2, follows), and batch 2 is planned after batch 1 ended,
	// without waiting for more than a late tick (generous: shared CI).
	p2, err := offsetlog.New[OffsetsEntry](cp, checkpoint.OffsetsDir).Get(ctx, 2)
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
		{"0 2 * *", "", `cron: "0 2 * *" has 4 fields`},
	}
	for _, tc := range cases {
		s, err := ParseSchedule(tc.spec)
		switch {
		case tc.err != "" && (!errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseSchedule(%q) error %v, want %q", tc.spec, err, tc.err)
		case tc.err == "" && (err != nil || s.String() != tc.want):
			t.Errorf("ParseSchedule(%q) = %v, %v; want %s", tc.spec, s, err, tc.want)
		}
	}
}
