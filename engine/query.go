package engine

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Query is a streaming query bound to its checkpoint. Build it with
// NewQuery, run it with Run. A Query runs at most once at a time.
type Query struct {
	cfg    config
	stream *Stream

	stop     chan struct{} // closed by Stop, once
	stopOnce sync.Once
	running  atomic.Bool

	mu struct {
		sync.Mutex
		last *Progress
		id   string
	}
}

// NewQuery checks the definition and returns a query ready to Run.
//
// The caller owns the sources, sinks and stores it hands over (the stream's
// sources, WithSink, WithLateRows, WithCheckpoint): the query never closes
// them. Close them after the last Run has returned.
func NewQuery(stream *Stream, opts ...Option) (*Query, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if stream == nil {
		return nil, fmt.Errorf("%w: nil stream", ErrInvalidQuery)
	}
	// Bind once now so a bad definition fails at construction.
	ex, err := bindStream(stream, &cfg)
	if err != nil {
		return nil, err
	}
	ex.release()
	return &Query{cfg: cfg, stream: stream, stop: make(chan struct{})}, nil
}

// Stop asks the query to finish the batch in flight, commit it, and return
// from Run with nil; a wait for the next trigger ends at once. Cancelling
// Run's context instead abandons the batch in flight (safe: it is re-run on
// restart).
//
// Stop is final and may be called any number of times, from any goroutine,
// before or during Run: a Run that begins after Stop returns nil at once,
// without opening the checkpoint. To run the query again, build a new
// Query with NewQuery.
func (q *Query) Stop() { q.stopOnce.Do(func() { close(q.stop) }) }

// stopped reports whether Stop was called.
func (q *Query) stopped() bool {
	select {
	case <-q.stop:
		return true
	default:
		return false
	}
}

// LastProgress returns the progress of the newest batch this run
// committed, or nil.
func (q *Query) LastProgress() *Progress {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.last
}

// ID returns the checkpoint's query id once Run has opened it.
func (q *Query) ID() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.id
}
