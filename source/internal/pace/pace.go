// Package pace decides how far an endless generator (source/rate,
// source/nexmark) has advanced by the clock: items become available at a
// fixed rate from the moment the source was created, numbered after the
// start position of its first planning call, so a query that restarts at
// position N sees N, N+1, … arrive at the configured rate. Freeze stops
// the clock at the moment of the call (an AvailableNow run).
//
// A Pace is not safe for concurrent use: the source holds its own mutex
// around it.
package pace

import "time"

// Pace is the clock-driven reach of one source.
type Pace struct {
	rate     int64 // items per second
	clock    func() time.Time
	created  time.Time
	anchored bool
	anchor   int64
	frozen   bool
	frozenAt time.Time
}

// New returns a Pace of rate items per second from now (by clock).
func New(rate int64, clock func() time.Time) Pace {
	return Pace{rate: rate, clock: clock, created: clock()}
}

// Reach returns the position the clock allows: the start of the first
// call plus the items the rate produced since New (up to Freeze).
func (p *Pace) Reach(start int64) int64 {
	if !p.anchored {
		p.anchored, p.anchor = true, start
	}
	now := p.clock()
	if p.frozen && now.After(p.frozenAt) {
		now = p.frozenAt
	}
	return p.anchor + ItemsIn(now.Sub(p.created), p.rate)
}

// Freeze makes Reach stop at the clock's time now.
func (p *Pace) Freeze() { p.frozen, p.frozenAt = true, p.clock() }

// Frozen reports whether Freeze was called.
func (p *Pace) Frozen() bool { return p.frozen }

// ItemsIn returns how many items rate per second produces in d, rounded
// down, without overflow for any d a clock gives.
func ItemsIn(d time.Duration, rate int64) int64 {
	if d <= 0 {
		return 0
	}
	return int64(d/time.Second)*rate + int64(d%time.Second)*rate/int64(time.Second)
}
