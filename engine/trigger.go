package engine

import (
	"fmt"
	"strings"
	"time"
)

// Trigger decides when the driver plans the next batch.
type Trigger struct {
	kind     triggerKind
	interval time.Duration
	schedule Schedule
}

// Schedule says when a scheduled query runs next: the first tick strictly
// after the given time. Package cron makes them: cron.MustParse or
// cron.Parse for a cron expression, cron.Every for aligned intervals.
type Schedule interface {
	Next(after time.Time) time.Time
	String() string
}

// Scheduled runs an AvailableNow pass at every tick of s — everything
// available when the tick fires, in as many batches as the per-trigger
// limits need — and sleeps in between. A pass still busy at the next tick
// is never overlapped: the ticks it covered are skipped, and the next pass
// starts at the first tick after it ends. Each pass shows in the progress
// log as its batches.
func Scheduled(s Schedule) Trigger { return Trigger{kind: triggerSchedule, schedule: s} }

type triggerKind int

const (
	triggerEvery triggerKind = iota
	triggerOnce
	triggerAvailableNow
	triggerSchedule
)

// Every is the processing-time trigger: a batch starts every d (aligned to
// multiples of d since the query started). A batch that takes longer than d
// is followed at once by the next; with no new data, no batch runs and the
// driver waits for the next tick. Every(0) runs batches back to back.
func Every(d time.Duration) Trigger { return Trigger{kind: triggerEvery, interval: d} }

// Once runs one batch with what is available (within the sources'
// per-trigger limits), after finishing any batch a crash left uncommitted,
// and then Run returns.
func Once() Trigger { return Trigger{kind: triggerOnce} }

// AvailableNow processes everything the sources have when the query starts,
// in as many batches as their per-trigger limits need, and then Run
// returns. It is the basis of scheduled queries.
func AvailableNow() Trigger { return Trigger{kind: triggerAvailableNow} }

// Interval is the expected time between batches under t: Every's d, or
// the gap between the two ticks of a schedule that follow now; 0 for
// Every(0), Once and AvailableNow. A health check's patience is a multiple
// of it (package monitor).
func (t Trigger) Interval(now time.Time) time.Duration {
	switch t.kind {
	case triggerEvery:
		return t.interval
	case triggerSchedule:
		if t.schedule == nil {
			return 0
		}
		a := t.schedule.Next(now)
		b := t.schedule.Next(a)
		if a.IsZero() || b.IsZero() {
			return 0
		}
		return b.Sub(a)
	}
	return 0
}

func (t Trigger) String() string {
	switch t.kind {
	case triggerOnce:
		return "once"
	case triggerAvailableNow:
		return "available-now"
	case triggerSchedule:
		return "scheduled " + t.schedule.String()
	default:
		return fmt.Sprintf("every %s", t.interval)
	}
}

// ParseTrigger parses a trigger flag: "once", "available-now", a duration
// ("1s", "500ms") for Every, or "schedule:SPEC" for Scheduled with a cron
// expression or "@every 15m" (see ParseSchedule).
func ParseTrigger(s string) (Trigger, error) {
	switch s {
	case "once":
		return Once(), nil
	case "available-now", "availableNow", "available_now":
		return AvailableNow(), nil
	}
	if spec, ok := strings.CutPrefix(s, "schedule:"); ok {
		sched, err := ParseSchedule(spec)
		if err != nil {
			return Trigger{}, fmt.Errorf("%w: trigger %q: %w", ErrInvalidQuery, s, err)
		}
		return Scheduled(sched), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return Trigger{}, fmt.Errorf("%w: trigger %q is not once, available-now or a duration such as 1s", ErrInvalidQuery, s)
	}
	return Every(d), nil
}

// clock is the time source of the driver. The planner knows time only
// through it.
type clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// funcClock adapts a user-supplied now function; waits use real time.
type funcClock struct{ now func() time.Time }

func (c funcClock) Now() time.Time                         { return c.now() }
func (c funcClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
