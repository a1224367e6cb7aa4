package cron

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Option configures Parse.
type Option func(*config)

type config struct{ loc *time.Location }

// WithLocation sets the time zone the fields are read in. Default: the
// expression's TZ= prefix, else UTC. A TZ= prefix wins over this option.
func WithLocation(loc *time.Location) Option {
	return func(c *config) { c.loc = loc }
}

// Parse parses a standard five-field cron expression:
//
//	minute hour day-of-month month day-of-week
//	0-59   0-23 1-31         1-12  0-7 (0 and 7 are Sunday)
//
// Each field is "*", a value, a range "a-b", a step "*/n", "a-b/n" or "a/n"
// (a to the field's maximum), or a comma-separated list of those. Months
// and days may be named (JAN-DEC, SUN-SAT, any case). The macros @yearly
// (@annually), @monthly, @weekly, @daily (@midnight) and @hourly stand for
// their usual expressions. A "TZ=Area/City " or "CRON_TZ=Area/City "
// prefix sets the time zone; otherwise WithLocation's, else UTC.
//
// Day-of-month and day-of-week combine as in Vixie cron: when both are
// restricted (neither starts with "*"), a day matches if either matches;
// otherwise both must (so the "*" one matches every day).
//
// Daylight-saving changes, for schedules whose hour field is restricted
// (does not start with "*"): a time skipped by a spring-forward change
// fires once at the first instant after the gap, and a time repeated by a
// fall-back change fires only at its first occurrence. Schedules with a "*"
// hour follow real time: every matching instant fires, none is added.
//
// An expression that can never fire (day 30 of February) is refused.
func Parse(expr string, opts ...Option) (*Schedule, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	s := &Schedule{expr: strings.TrimSpace(expr), loc: time.UTC}
	if cfg.loc != nil {
		s.loc = cfg.loc
	}
	rest := s.expr
	for _, prefix := range []string{"TZ=", "CRON_TZ="} {
		if strings.HasPrefix(rest, prefix) {
			name, after, ok := strings.Cut(rest[len(prefix):], " ")
			if !ok {
				return nil, fmt.Errorf("cron: %q: nothing after the time zone", expr)
			}
			loc, err := time.LoadLocation(name)
			if err != nil {
				return nil, fmt.Errorf("cron: %q: time zone %q: %w", expr, name, err)
			}
			s.loc, rest = loc, strings.TrimSpace(after)
			break
		}
	}
	if strings.HasPrefix(rest, "@") {
		m, ok := macros[strings.ToLower(rest)]
		if !ok {
			return nil, fmt.Errorf("cron: %q: unknown macro %q (want @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)", expr, rest)
		}
		rest = m
	}
	fields := strings.Fields(rest)
	if len(fields) != 5 {
		return nil, fmt.Errorf("cron: %q has %d fields, want 5 (minute hour day-of-month month day-of-week)", expr, len(fields))
	}
	for i, f := range fieldSpecs {
		bits, err := parseField(fields[i], f)
		if err != nil {
			return nil, fmt.Errorf("cron: %q: %s field %q: %w", expr, f.name, fields[i], err)
		}
		s.fields[i] = bits
	}
	// Day-of-week 7 is Sunday.
	if s.fields[fDow]&(1<<7) != 0 {
		s.fields[fDow] |= 1
		s.fields[fDow] &^= 1 << 7
	}
	s.domStar = strings.HasPrefix(fields[fDom], "*")
	s.dowStar = strings.HasPrefix(fields[fDow], "*")
	s.hourStar = strings.HasPrefix(fields[fHour], "*")
	if err := s.checkPossible(); err != nil {
		return nil, fmt.Errorf("cron: %q: %w", expr, err)
	}
	return s, nil
}

// MustParse is Parse for expressions fixed in the program: it panics when
// expr does not parse. Use Parse for expressions read from a flag or a
// file.
func MustParse(expr string, opts ...Option) *Schedule {
	s, err := Parse(expr, opts...)
	if err != nil {
		panic(err)
	}
	return s
}

var macros = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

const (
	fMinute = iota
	fHour
	fDom
	fMonth
	fDow
)

type field struct {
	name     string
	min, max int
	names    []string // names[i] is value min+i
}

var fieldSpecs = [5]field{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day-of-month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	{name: "day-of-week", min: 0, max: 7, names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
}

func parseField(s string, f field) (uint64, error) {
	var set uint64
	for part := range strings.SplitSeq(s, ",") {
		if part == "" {
			return 0, fmt.Errorf("empty list element")
		}
		rng, stepStr, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepStr)
			if err != nil || n < 1 {
				return 0, fmt.Errorf("step %q is not a positive number", stepStr)
			}
			step = n
		}
		lo, hi := f.min, f.max
		switch {
		case rng == "*":
		default:
			a, b, isRange := strings.Cut(rng, "-")
			v, err := value(a, f)
			if err != nil {
				return 0, err
			}
			lo = v
			switch {
			case isRange:
				w, err := value(b, f)
				if err != nil {
					return 0, err
				}
				if w < v {
					return 0, fmt.Errorf("range %d-%d runs backwards", v, w)
				}
				hi = w
			case !hasStep:
				hi = v // a single value; "a/n" runs a to the maximum
			}
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << v
		}
	}
	return set, nil
}

func value(s string, f field) (int, error) {
	for i, n := range f.names {
		if strings.EqualFold(s, n) {
			return f.min + i, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		if len(f.names) > 0 {
			return 0, fmt.Errorf("%q is neither a number nor a name (%s…)", s, strings.ToUpper(f.names[0]))
		}
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if v < f.min || v > f.max {
		return 0, fmt.Errorf("%d is out of range %d-%d", v, f.min, f.max)
	}
	return v, nil
}

// Schedule is a parsed cron expression. It is immutable and safe for
// concurrent use.
type Schedule struct {
	expr                       string
	loc                        *time.Location
	fields                     [5]uint64
	domStar, dowStar, hourStar bool
}

// String is "cron " and the expression as given (trimmed).
func (s *Schedule) String() string { return "cron " + s.expr }

var monthDays = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// checkPossible refuses a day-of-month that no selected month has, when
// the day of week does not offer another way to match.
func (s *Schedule) checkPossible() error {
	if s.domStar || !s.dowStar {
		return nil
	}
	minDom := bits.TrailingZeros64(s.fields[fDom])
	for m := 1; m <= 12; m++ {
		if s.fields[fMonth]&(1<<m) != 0 && minDom <= monthDays[m] {
			return nil
		}
	}
	return fmt.Errorf("no selected month has day %d: the schedule never fires", minDom)
}

func (s *Schedule) dayMatches(t time.Time) bool {
	dom := s.fields[fDom]&(1<<t.Day()) != 0
	dow := s.fields[fDow]&(1<<int(t.Weekday())) != 0
	if s.domStar || s.dowStar {
		return dom && dow
	}
	return dom || dow
}

func (s *Schedule) wallMatches(t time.Time) bool {
	return s.fields[fMonth]&(1<<int(t.Month())) != 0 && s.dayMatches(t) &&
		s.fields[fHour]&(1<<t.Hour()) != 0 && s.fields[fMinute]&(1<<t.Minute()) != 0
}

// Next returns the first instant strictly after after at which the
// schedule fires, in the schedule's location; the zero time if none comes
// within eight years (Parse refuses such schedules).
func (s *Schedule) Next(after time.Time) time.Time {
	t := after.In(s.loc).Truncate(time.Minute).Add(time.Minute)
	limit := t.AddDate(8, 0, 0)
	for t.Before(limit) {
		if !s.hourStar && s.fillsGap(t) {
			return t
		}
		y, mo, d := t.Date()
		var next time.Time
		switch {
		case s.fields[fMonth]&(1<<int(mo)) == 0:
			next = firstInstant(time.Date(y, mo+1, 1, 0, 0, 0, 0, s.loc))
		case !s.dayMatches(t):
			next = firstInstant(time.Date(y, mo, d+1, 0, 0, 0, 0, s.loc))
		case s.fields[fHour]&(1<<t.Hour()) == 0:
			next = firstInstant(time.Date(y, mo, d, t.Hour()+1, 0, 0, 0, s.loc))
		case s.fields[fMinute]&(1<<t.Minute()) == 0:
			next = t.Add(time.Minute)
		default:
			if _, repeated := earlierSameWall(t); s.hourStar || !repeated {
				return t
			}
			next = t.Add(time.Minute)
		}
		// Midnight inside a gap, or a zone jump, must not move us back.
		if !next.After(t) {
			next = t.Add(time.Minute)
		}
		// Never step over a gap's end without looking at it.
		if g := gapEndBetween(t, next); !g.IsZero() && g.Before(next) {
			next = g
		}
		t = next
	}
	return time.Time{}
}

// fillsGap reports whether t is the first instant after a spring-forward
// gap in which a wall time of the schedule was skipped.
func (s *Schedule) fillsGap(t time.Time) bool {
	prev := t.Add(-time.Minute)
	_, po := prev.Zone()
	_, to := t.Zone()
	if to <= po {
		return false
	}
	// Wall times from prev+1m up to t-1m (in the old offset) did not exist.
	wall := time.Date(prev.Year(), prev.Month(), prev.Day(), prev.Hour(), prev.Minute(), 0, 0, time.UTC)
	for i := 1; i < (to-po)/60+1; i++ {
		w := wall.Add(time.Duration(i) * time.Minute)
		if s.wallMatches(w) {
			return true
		}
	}
	return false
}

// earlierSameWall returns the earlier instant that showed t's wall clock,
// if there is one (t is in the second pass through a fall-back hour).
func earlierSameWall(t time.Time) (time.Time, bool) {
	_, to := t.Zone()
	for _, back := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour} {
		_, eo := t.Add(-back).Zone()
		if eo <= to {
			continue
		}
		s := t.Add(-time.Duration(eo-to) * time.Second)
		if _, so := s.Zone(); so == eo {
			return s, true
		}
	}
	return time.Time{}, false
}

// firstInstant returns the first instant that shows t's wall clock
// (time.Date may pick either occurrence of an ambiguous wall time).
func firstInstant(t time.Time) time.Time {
	if s, ok := earlierSameWall(t); ok {
		return s
	}
	return t
}

// gapEndBetween returns the first instant in (a, b] whose offset differs
// from a's by a forward jump, or the zero time. Only used to avoid skipping
// past a gap when Next jumps by hours or days.
func gapEndBetween(a, b time.Time) time.Time {
	if b.Sub(a) <= time.Minute {
		return time.Time{}
	}
	_, ao := a.Zone()
	if _, bo := b.Zone(); bo <= ao {
		return time.Time{}
	}
	// Binary search the transition to the minute.
	lo, hi := a, b
	for hi.Sub(lo) > time.Minute {
		mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Minute)
		if !mid.After(lo) {
			mid = lo.Add(time.Minute)
		}
		if _, mo := mid.Zone(); mo == ao {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}
