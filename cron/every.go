package cron

import "time"

// Every returns the schedule that ticks at every multiple of d since the
// Unix epoch (d = 1h ticks on the hour, 15m at :00, :15, :30, :45),
// whatever the time zone. d must be positive; a non-positive d is taken as
// one minute.
func Every(d time.Duration) Interval {
	if d <= 0 {
		d = time.Minute
	}
	return Interval{d: d}
}

// Interval is the schedule Every returns.
type Interval struct{ d time.Duration }

// Next returns the first multiple of the interval since the epoch strictly
// after after, in after's location.
func (s Interval) Next(after time.Time) time.Time {
	// Whole multiples of d since the epoch, in nanoseconds; floor division
	// so times before 1970 also align.
	ns, d := after.UnixNano(), int64(s.d)
	q := ns / d
	if ns%d < 0 {
		q--
	}
	return time.Unix(0, (q+1)*d).In(after.Location())
}

// String is "every " and the interval ("every 15m0s").
func (s Interval) String() string { return "every " + s.d.String() }
