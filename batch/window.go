package batch

// The columns an event-time window adds to the rows it groups, before the
// keys: the window's start (inclusive) and end (exclusive), of the
// event-time column's type.
const (
	WindowStart = "window_start"
	WindowEnd   = "window_end"
)
