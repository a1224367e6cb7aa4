package engine

import "fmt"

// Listener observes a query's runs: metrics, a status page, alerts. It is
// any value that implements one or more of QueryStartListener,
// BatchRecoveredListener, BatchCommittedListener and QueryStopListener; the
// engine finds them by type assertion, the way kgo finds a hook's methods.
// Add one with WithListener. Package monitor is one: Prometheus metrics
// and an HTTP status server, which the engine itself never links.
//
// Every call comes from the driver goroutine of Run, in this order:
// OnQueryStart once the checkpoint is open and before any batch;
// OnBatchRecovered before a batch planned by an earlier run is re-run;
// OnBatchCommitted after each batch commits; OnQueryStop when Run returns.
// The driver waits for each call, so a listener must not block. Listeners
// are called in the order they were added, and before the functions of
// WithProgressListener.
type Listener any

// QueryStartListener is told that a run starts. A non-nil error (an
// address in use, a metrics registration conflict) fails Run with that
// error once every listener's OnQueryStart was called, before any batch.
// A listener whose OnQueryStart failed cleans up before it returns: it gets
// no OnQueryStop for that run. Every other listener does, as for any other
// end of Run.
type QueryStartListener interface {
	OnQueryStart(info QueryInfo) error
}

// BatchRecoveredListener is told that batch batchID, planned by an earlier
// run and not committed, is about to be re-run from its write-ahead entry.
type BatchRecoveredListener interface {
	OnBatchRecovered(batchID int64)
}

// BatchCommittedListener receives each batch's progress after the batch
// commits. The Progress shares its maps and slices with the engine's copy:
// read them, do not change them.
type BatchCommittedListener interface {
	OnBatchCommitted(p Progress)
}

// QueryStopListener is told that Run returns, with the error it returns
// (nil after Stop or a finished Once or AvailableNow run). It is not told
// when its own OnQueryStart failed.
type QueryStopListener interface {
	OnQueryStop(err error)
}

// QueryInfo describes the run a QueryStartListener is told of.
type QueryInfo struct {
	// ID is the checkpoint's stable query id.
	ID string
	// RunID is this Run's id, new on every Run.
	RunID string
	// Name is the query's name (WithName, else the checkpoint's).
	Name string
	// Trigger is the query's trigger.
	Trigger Trigger
	// Plan is the query's plan (Query.Describe).
	Plan Plan
}

// WithListener adds a listener (see Listener). l must implement at least
// one of the listener interfaces. Default: none.
func WithListener(l Listener) Option {
	return func(c *config) { c.hooks = append(c.hooks, l) }
}

// validateListeners reports each listener that implements none of the
// listener interfaces (a typo in a method name, a pointer receiver on a
// value).
func validateListeners(hooks []Listener) []string {
	var errs []string
	for i, h := range hooks {
		switch h.(type) {
		case QueryStartListener, BatchRecoveredListener, BatchCommittedListener, QueryStopListener:
			continue
		}
		errs = append(errs, fmt.Sprintf("listener %d (%T) has none of OnQueryStart, OnBatchRecovered, OnBatchCommitted and OnQueryStop", i, h))
	}
	return errs
}

// notifyStart calls every listener's OnQueryStart. It returns the
// listeners to tell of the run's end (all but those whose start failed)
// and the first error.
func (c *config) notifyStart(info QueryInfo) (started []Listener, err error) {
	for _, h := range c.hooks {
		if l, ok := h.(QueryStartListener); ok {
			if e := l.OnQueryStart(info); e != nil {
				if err == nil {
					err = e
				}
				continue
			}
		}
		started = append(started, h)
	}
	return started, err
}

func (c *config) notifyRecovered(batchID int64) {
	for _, h := range c.hooks {
		if l, ok := h.(BatchRecoveredListener); ok {
			l.OnBatchRecovered(batchID)
		}
	}
}

// notifyCommitted tells the listeners, then the progress functions.
func (c *config) notifyCommitted(p Progress) {
	for _, h := range c.hooks {
		if l, ok := h.(BatchCommittedListener); ok {
			l.OnBatchCommitted(p)
		}
	}
	for _, fn := range c.listeners {
		fn(p)
	}
}

func notifyStop(started []Listener, err error) {
	for _, h := range started {
		if l, ok := h.(QueryStopListener); ok {
			l.OnQueryStop(err)
		}
	}
}
