// Package monitor serves a query's Prometheus metrics and an HTTP status
// page. It is a plugin on the engine's listener API, the way franz-go's
// kprom is a plugin on kgo's hooks: the engine links neither the
// Prometheus client nor an HTTP server, and a program that never imports
// this package does not either.
//
//	m := monitor.New(monitor.WithMetrics(reg), monitor.WithStatusServer("127.0.0.1:8080"))
//	q, err := engine.NewQuery(stream, engine.WithListener(m), …)
//
// # What it owns
//
// The collectors it registers on the Registerer it is given (never a
// global one) and, with WithStatusServer, one listening socket and the
// goroutine serving it, and the progress records of the last WithHistory
// batches (in memory, for the page). A Listener never touches the
// checkpoint and cannot fail a batch: its only way to stop a query is to
// fail OnQueryStart. CheckpointHandler reads a checkpoint and never writes
// it nor takes its lock.
//
// # Lifecycle
//
//  1. New builds a Listener; nothing is registered or listened on yet.
//  2. OnQueryStart (the engine calls it once Run has opened the
//     checkpoint, so the query's name is known): register the metrics,
//     labelled query=<name>, and start the status server. A registration
//     conflict with a running query of the same name, or an address in
//     use, fails Run.
//  3. OnBatchRecovered and OnBatchCommitted update the metrics and the
//     status.
//  4. OnQueryStop: the server shuts down (requests in flight get two
//     seconds); the metrics stay registered with onceflow_query_running at
//     0, so the last values remain scrapeable. A later Run takes them
//     over.
//
// One Listener serves one query at a time: OnQueryStart of a second query
// while the first runs fails. It may serve the same query again after its
// Run returned.
//
// # Endpoints
//
//	/metrics  the Prometheus metrics (WithMetrics' registry when it is also
//	          a Gatherer, else a private registry)
//	/status   JSON (Status): query id, name, run id, state, trigger, start,
//	          last commit, seconds since it, health, last error, last
//	          progress, and with WithTasks the tasks of a scale-out worker
//	          (package scaleout). The document is a contract: fields are
//	          only added.
//	/healthz  200 "ok", or 503 with the reason (HealthRule)
//	/         the status page: header, plan, charts and recent batches,
//	          drawn by assets/app.js with the vendored uPlot; no CDN, no
//	          inline script or style (Content-Security-Policy), text set
//	          with textContent only
//	/assets/… the page's embedded files (go:embed)
//	/api/page JSON the page polls every 2 s: the Status, the plan
//	          (engine.Plan), and one summary per kept batch (rates,
//	          phase durations, state per operator, lag per partition,
//	          watermark delay, late rows, offsets); read under one lock
//	          with the status, so both tell the same newest batch. For the
//	          page only: its fields may change.
//	/api/progress/{id}
//	          batch id's progress record, while the page keeps it (404
//	          after)
//
// CheckpointHandler serves /, /assets/…, /api/page, /api/progress/{id}
// and /status from a checkpoint's progress/ records (onceflow checkpoint
// serve): the same page, read-only. Whether a driver runs is read from
// /proc/locks (the engine's flock on <checkpoint>/.lock), never by trying
// the lock; on object storage it is "unknown".
//
// The status methods and the HTTP handlers are safe for concurrent use;
// the On… methods are called by the engine's driver goroutine.
package monitor
