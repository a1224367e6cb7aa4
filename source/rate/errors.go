package rate

import "errors"

var (
	// ErrBadOffset is returned for an offset that is not this source's
	// JSON ({"rows":N} with N >= 0), or a range whose end is before its
	// start.
	ErrBadOffset = errors.New("rate: bad offset")
	// ErrBadOption is returned by New for an option out of range.
	ErrBadOption = errors.New("rate: bad option")
)
