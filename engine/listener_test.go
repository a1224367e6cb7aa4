package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/cron"
	"github.com/onceflow/onceflow/memsink"
)

// recorder is a listener of every kind that writes what it is told.
type recorder struct {
	name     string
	log      *[]string
	startErr error
}

func (r recorder) OnQueryStart(info QueryInfo) error {
	*r.log = append(*r.log, fmt.Sprintf("%s start %s %s", r.name, info.Name, info.Trigger))
	if info.ID == "" || info.RunID == "" {
		*r.log = append(*r.log, r.name+" start without ids")
	}
	return r.startErr
}
func (r recorder) OnBatchRecovered(id int64) {
	*r.log = append(*r.log, fmt.Sprintf("%s recovered %d", r.name, id))
}
func (r recorder) OnBatchCommitted(p Progress) {
	*r.log = append(*r.log, fmt.Sprintf("%s committed %d", r.name, p.BatchID))
}
func (r recorder) OnQueryStop(err error) { *r.log = append(*r.log, r.name+" stop "+errName(err)) }

var (
	errSinkDown = errors.New("sink down")
	errInUse    = errors.New("address in use")
)

// errName names the sentinel err wraps, so the log does not pin the
// engine's wording around it.
func errName(err error) string {
	for _, e := range []error{errSinkDown, errInUse} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return fmt.Sprint(err)
}

// failOnceSink fails the first AddBatch of batch failAt, like a crash in
// the sink.
type failOnceSink struct {
	*memsink.Sink
	failAt int64
	failed bool
}

func (s *failOnceSink) AddBatch(ctx context.Context, id int64, sc *arrow.Schema, recs []arrow.RecordBatch) error {
	if id == s.failAt && !s.failed {
		s.failed = true
		return errSinkDown
	}
	return s.Sink.AddBatch(ctx, id, sc, recs)
}

func TestListenersAreToldInOrder(t *testing.T) {
	var log []string
	cp := localStore(t)
	sink := &failOnceSink{Sink: memsink.New("out"), failAt: 1}
	opts := []Option{WithName("pay"), WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()),
		WithProgressListener(func(p Progress) { log = append(log, fmt.Sprintf("fn committed %d", p.BatchID)) }),
		WithListener(recorder{name: "a", log: &log}), WithListener(recorder{name: "b", log: &log})}
	if _, err := runQuery(t, ReadStream(newSeq(20, 10, 2)), opts...); !errors.Is(err, errSinkDown) {
		t.Fatalf("first run: %v, want the sink's error", err)
	}
	if _, err := runQuery(t, ReadStream(newSeq(20, 10, 2)), opts...); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(log, "\n")
	want := strings.Join([]string{
		"a start pay available-now", "b start pay available-now",
		"a committed 0", "b committed 0", "fn committed 0",
		"a stop sink down", "b stop sink down",
		"a start pay available-now", "b start pay available-now",
		"a recovered 1", "b recovered 1",
		"a committed 1", "b committed 1", "fn committed 1",
		"a stop <nil>", "b stop <nil>",
	}, "\n")
	if got != want {
		t.Fatalf("events\n got:\n%s\nwant:\n%s", got, want)
	}
}

func TestListenerStartErrorFailsRun(t *testing.T) {
	var log []string
	sink := memsink.New("out")
	_, err := runQuery(t, ReadStream(newSeq(5, 0, 1)), WithName("q"), WithCheckpoint(localStore(t)), WithSink(sink), WithTrigger(Once()),
		WithListener(recorder{name: "a", log: &log, startErr: errInUse}), WithListener(recorder{name: "b", log: &log}))
	if !errors.Is(err, errInUse) {
		t.Fatalf("Run = %v, want the listener's start error", err)
	}
	if ids := sink.BatchIDs(); len(ids) != 0 {
		t.Fatalf("batches %v ran after a listener failed to start", ids)
	}
	want := "a start q once\nb start q once\nb stop address in use" // a failed to start: no stop
	if got := strings.Join(log, "\n"); got != want {
		t.Fatalf("events\n got:\n%s\nwant:\n%s", got, want)
	}
}

type notAListener struct{}

func (notAListener) OnQueryStarted(QueryInfo) error { return nil } // misspelt

func TestListenerWithoutHooksIsRefused(t *testing.T) {
	_, err := NewQuery(ReadStream(newSeq(5, 0, 1)), WithCheckpoint(localStore(t)), WithSink(memsink.New("o")), WithListener(notAListener{}))
	if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), "listener 0 (engine.notAListener) has none of OnQueryStart") {
		t.Fatalf("NewQuery = %v, want the listener refused", err)
	}
}

func TestTriggerInterval(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 7, 0, 0, time.UTC)
	cases := []struct {
		name string
		tr   Trigger
		want time.Duration
	}{
		{"every", Every(30 * time.Second), 30 * time.Second},
		{"back to back", Every(0), 0},
		{"once", Once(), 0},
		{"available now", AvailableNow(), 0},
		{"aligned schedule", Scheduled(cron.Every(time.Hour)), time.Hour},
		{"cron: the gap between the next two ticks", Scheduled(cron.MustParse("0 9,17 * * *")), 8 * time.Hour},
		{"no schedule", Scheduled(nil), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.tr.Interval(t0); got != tc.want {
				t.Fatalf("Interval = %s, want %s", got, tc.want)
			}
		})
	}
}
