package scaleout

import (
	"context"
	"strconv"

	"github.com/onceflow/onceflow/storage"
)

// Task is one unit of a scaled-out query: partition Partition of the lead
// topic (and of every topic co-partitioned with it).
type Task struct {
	Partition int32
}

// ID is the task's id: its partition number in decimal.
func (t Task) ID() string { return strconv.Itoa(int(t.Partition)) }

// Checkpoint returns the task's checkpoint under root: root's
// tasks/<id>/ folder. Every worker that runs the task finds the same one.
func (t Task) Checkpoint(root storage.Store) storage.Store {
	return storage.Sub(root, "tasks/"+t.ID())
}

// Name returns the task's name for a query named query: query + "-t" + id.
// Give it to the task's query (engine.WithName), so its progress and
// metrics carry the task, and use it as the job of a PostgreSQL progress
// row, so each task has its own.
func (t Task) Name(query string) string { return query + "-t" + t.ID() }

// Query is what a task runs; *engine.Query implements it. Run runs until
// Stop or the context ends; Stop asks it to finish the batch in flight and
// return.
type Query interface {
	Run(ctx context.Context) error
	Stop()
}

// BuildFunc builds the query of task t. It is called each time the task
// starts on this worker (when assigned, and again after a failed Run).
// release, when not nil, is called once the query's Run has returned, to
// close the sources and sinks the query used.
type BuildFunc func(ctx context.Context, t Task) (q Query, release func() error, err error)

// EventKind names what happened to a task.
type EventKind string

// The task events.
const (
	// EventAssigned: the group gave the task to this worker.
	EventAssigned EventKind = "assigned"
	// EventStarted: the task's query was built and its Run began.
	EventStarted EventKind = "started"
	// EventFailed: the task's Run returned an error; it is retried after
	// Event.Backoff.
	EventFailed EventKind = "failed"
	// EventFinished: the task's Run returned nil without being stopped
	// (its trigger ended, as AvailableNow does); it is not run again.
	EventFinished EventKind = "finished"
	// EventRevoked: the group took the task away (or it was lost, or the
	// worker is stopping); the worker stops it.
	EventRevoked EventKind = "revoked"
	// EventStopped: a revoked task's Run has returned.
	EventStopped EventKind = "stopped"
)

// Event is one change of a task on this worker.
type Event struct {
	Kind EventKind
	Task Task
	// Err is the failure of EventFailed, and of EventStopped when the stop
	// timed out and the batch in flight was abandoned.
	Err error
	// Backoff is the wait before the retry of EventFailed.
	Backoff string
}

// TaskStatus is one task a worker owns (Worker.Tasks).
type TaskStatus struct {
	ID        string `json:"id"`
	Partition int32  `json:"partition"`
	// State is "starting", "running", "retrying", "finished" or
	// "stopping".
	State string `json:"state"`
	// Attempts counts the Runs of the task's query on this worker.
	Attempts  int    `json:"attempts"`
	LastError string `json:"lastError,omitempty"`
}
