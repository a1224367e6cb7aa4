package monitor

import (
	"fmt"
	"time"
)

// HealthRule says when /healthz answers 503. The query is unhealthy when
// its driver is not running, or when the time since its last commit (or
// since it started, before its first commit) exceeds
//
//	max(Intervals × trigger interval, MinAge)
//
// where the trigger interval is Every's d or the gap between two ticks of a
// schedule (0 for Every(0), Once and AvailableNow, leaving MinAge). MaxAge,
// when set, replaces that formula. An idle source produces no batch and
// so no commit: set the rule to the quietest period the data may have, or
// Disabled to check only that the driver runs.
type HealthRule struct {
	// Intervals is how many trigger intervals may pass without a commit.
	// Default 10.
	Intervals int
	// MinAge is the least age that is unhealthy. Default 5 minutes.
	MinAge time.Duration
	// MaxAge, when positive, is the age that is unhealthy, whatever the
	// trigger.
	MaxAge time.Duration
	// Disabled turns the age check off.
	Disabled bool
}

// Defaults of HealthRule.
const (
	DefaultHealthIntervals = 10
	DefaultHealthMinAge    = 5 * time.Minute
)

func (h HealthRule) maxAge(interval time.Duration) time.Duration {
	if h.MaxAge > 0 {
		return h.MaxAge
	}
	n := h.Intervals
	if n <= 0 {
		n = DefaultHealthIntervals
	}
	floor := h.MinAge
	if floor <= 0 {
		floor = DefaultHealthMinAge
	}
	return max(time.Duration(n)*interval, floor)
}

func (h HealthRule) check(st state, now time.Time) (bool, string) {
	if !st.running {
		return false, "the query's driver is not running"
	}
	if h.Disabled {
		return true, ""
	}
	age, limit := st.sinceCommit(now), h.maxAge(st.interval)
	if age > limit {
		what := "the last commit"
		if st.lastCommitAt.IsZero() {
			what = "the start, with no commit since,"
		}
		return false, fmt.Sprintf("%s was %s ago, more than the %s the health rule allows", what, age.Round(time.Millisecond), limit)
	}
	return true, ""
}
