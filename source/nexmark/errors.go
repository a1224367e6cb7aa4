package nexmark

import "errors"

var (
	// ErrBadOffset is returned for an offset that is not this source's
	// JSON ({"events":N} with N >= 0), or a range whose end is before its
	// start or beyond the total events.
	ErrBadOffset = errors.New("nexmark: bad offset")
	// ErrBadOption is returned by New for an option out of range.
	ErrBadOption = errors.New("nexmark: bad option")
)
