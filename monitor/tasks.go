package monitor

// WithTasks adds to /status a "tasks" member: what fn returns, as JSON,
// on each request. A worker of a scaled-out query (package scaleout) gives
// it Worker.Tasks, so the status page of a task's query lists every task
// the worker owns, with its state:
//
//	monitor.New(monitor.WithStatusServer(addr), monitor.WithTasks(func() any { return w.Tasks() }))
//
// fn is called on the HTTP server's goroutines and must be safe for
// concurrent use. Default: none, and /status has no "tasks" member.
func WithTasks(fn func() any) Option {
	return func(l *Listener) { l.tasks = fn }
}
