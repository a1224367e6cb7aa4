package monitor

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceflow/onceflow/engine"
)

// Option configures New.
type Option func(*Listener)

// WithMetrics exports the query's metrics through reg (never a global
// registry). They are registered when Run has opened the checkpoint (the
// query's name is known then) with a const label query=<name>, and stay
// registered after Run returns, with onceflow_query_running at 0, so the
// last values remain scrapeable. A later Run of a query of the same name
// on reg takes them over; while one is running, a second one fails to
// start with an error naming the query (engine.ErrConcurrentDriver).
// Default: no metrics (or a private registry behind WithStatusServer's
// /metrics).
//
// The metrics, all labelled query:
//
//	onceflow_query_running                     1 while Run runs, else 0
//	onceflow_seconds_since_last_commit         at scrape time: since this run's last commit, or since the run started
//	onceflow_last_committed_batch_id           newest committed batch id (-1 before any)
//	onceflow_last_batch_duration_seconds       duration of the newest batch
//	onceflow_batch_duration_seconds            histogram of batch durations
//	onceflow_batches_total                     batches committed
//	onceflow_recovered_batches_total           batches re-run from the write-ahead log after a restart
//	onceflow_input_rows_total{source}          rows read, per source
//	onceflow_output_rows_total{sink}           rows handed to each sink
//	onceflow_source_lag{source,partition}      records available and not yet planned (sources that report it)
//	onceflow_state_rows{operator}              live state rows
//	onceflow_state_memory_bytes{operator}      memory the state's working copy uses
//	onceflow_late_rows_dropped_total{operator} rows dropped as older than the watermark
//
// Source lag comes from the source's SourceMetrics: a "partitions" entry
// holding a list of objects with "topic", "partition" and "lag" members
// (any letter case, so the JSON of the Kafka source's PartitionStats
// qualifies), or a "lag" entry mapping partition names to numbers.
// Sources that report neither have no lag series.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(l *Listener) { l.reg = reg }
}

// WithStatusServer serves the query's status over HTTP on addr
// ("127.0.0.1:0" picks a free port; StatusAddr tells which) from when Run
// has opened the checkpoint until Run returns: /metrics, /status and
// /healthz (see the package documentation). A failure to listen fails
// Run. Default: no server.
func WithStatusServer(addr string) Option {
	return func(l *Listener) { l.addr = addr }
}

// WithHistory sets how many of the latest batches the status page (/ of
// WithStatusServer) charts and lists; their progress records are kept in
// memory. n ≤ 0 means the default, DefaultHistory (300).
func WithHistory(n int) Option {
	return func(l *Listener) { l.historyN = n }
}

// WithHealthRule sets when /healthz reports the query unhealthy. Default:
// HealthRule{} (10 trigger intervals, at least 5 minutes).
func WithHealthRule(r HealthRule) Option {
	return func(l *Listener) { l.rule = r }
}

// Listener is an engine listener (engine.WithListener) that keeps a
// query's metrics and status. Build it with New.
type Listener struct {
	now      func() time.Time // test knob; time.Now
	reg      prometheus.Registerer
	addr     string
	rule     HealthRule
	historyN int
	// tasks is WithTasks' function, or nil.
	tasks func() any

	mu struct {
		sync.Mutex
		queryID, runID, name string
		trigger              string
		running              bool
		startedAt            time.Time
		lastCommitAt         time.Time
		last                 *engine.Progress
		lastErr              error
		interval             time.Duration
		listenAddr           string
		plan                 *engine.Plan
		history              history // the page's last batches
	}
	// Set and read by the driver goroutine only (the On… methods).
	metrics *queryMetrics
	server  *statusServer
}

var (
	_ engine.QueryStartListener     = (*Listener)(nil)
	_ engine.BatchRecoveredListener = (*Listener)(nil)
	_ engine.BatchCommittedListener = (*Listener)(nil)
	_ engine.QueryStopListener      = (*Listener)(nil)
)

// New returns a listener configured by opts. Give it to one query with
// engine.WithListener.
func New(opts ...Option) *Listener {
	l := &Listener{now: time.Now}
	for _, o := range opts {
		o(l)
	}
	return l
}

// OnQueryStart registers the metrics and starts the status server (see
// WithMetrics and WithStatusServer). It implements
// engine.QueryStartListener.
func (l *Listener) OnQueryStart(info engine.QueryInfo) error {
	now := l.now()
	l.mu.Lock()
	if l.mu.running {
		name := l.mu.name
		l.mu.Unlock()
		return fmt.Errorf("monitor: this Listener already serves the running query %q; give query %q its own (monitor.New)", name, info.Name)
	}
	if l.mu.queryID != info.ID {
		l.mu.history = history{}
	}
	l.mu.history.n = l.historySize()
	plan := info.Plan
	l.mu.plan = &plan
	l.mu.queryID, l.mu.runID, l.mu.name = info.ID, info.RunID, info.Name
	l.mu.trigger = info.Trigger.String()
	l.mu.running = true
	l.mu.startedAt = now
	l.mu.lastCommitAt = time.Time{}
	l.mu.last = nil
	l.mu.lastErr = nil
	l.mu.interval = info.Trigger.Interval(now)
	l.mu.Unlock()

	var errs []error
	reg := l.reg
	if reg == nil && l.addr != "" {
		reg = prometheus.NewRegistry() // private, for /metrics
		l.reg = reg
	}
	if reg != nil {
		qm := l.metrics
		if qm == nil || qm.name != info.Name {
			qm = newQueryMetrics(info.Name, l)
		}
		// Again on every Run: another query of the name may have taken
		// the registration over while this one was stopped.
		if err := qm.register(reg); err != nil {
			errs = append(errs, err)
		} else {
			l.metrics = qm
		}
	}
	if l.addr != "" && len(errs) == 0 {
		srv, err := startStatusServer(l)
		if err != nil {
			errs = append(errs, err)
		} else {
			l.server = srv
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		// The engine sends no OnQueryStop after a failed start: end the
		// run here, as OnQueryStop would with this error.
		l.OnQueryStop(err)
	}
	return err
}

// OnBatchCommitted updates the metrics and the status. It implements
// engine.BatchCommittedListener.
func (l *Listener) OnBatchCommitted(p engine.Progress) {
	l.mu.Lock()
	l.mu.last = &p
	l.mu.lastCommitAt = l.now()
	l.mu.history.add(&p)
	l.mu.Unlock()
	if l.metrics != nil {
		l.metrics.observe(&p)
	}
}

// OnBatchRecovered counts a batch re-run after a restart. It implements
// engine.BatchRecoveredListener.
func (l *Listener) OnBatchRecovered(int64) {
	if l.metrics != nil {
		l.metrics.recovered.Inc()
	}
}

// OnQueryStop records the end of the run and shuts the status server
// down. It implements engine.QueryStopListener.
func (l *Listener) OnQueryStop(err error) {
	l.mu.Lock()
	l.mu.running = false
	l.mu.lastErr = err
	l.mu.Unlock()
	if l.server != nil {
		l.server.shutdown()
		l.server = nil
	}
	l.mu.Lock()
	l.mu.listenAddr = ""
	l.mu.Unlock()
}

// StatusAddr returns the address the status server listens on while Run
// runs, or "" when there is none.
func (l *Listener) StatusAddr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.listenAddr
}

// state is what the status endpoint and the gauges read.
type state struct {
	queryID, runID, name string
	trigger              string
	running              bool
	startedAt            time.Time
	lastCommitAt         time.Time
	last                 *engine.Progress
	lastErr              error
	interval             time.Duration
}

func (l *Listener) state() state {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stateLocked()
}

// stateLocked is state with l.mu held.
func (l *Listener) stateLocked() state {
	return state{
		queryID: l.mu.queryID, runID: l.mu.runID, name: l.mu.name, trigger: l.mu.trigger, running: l.mu.running,
		startedAt: l.mu.startedAt, lastCommitAt: l.mu.lastCommitAt, last: l.mu.last, lastErr: l.mu.lastErr,
		interval: l.mu.interval,
	}
}

// sinceCommit is the time since this run's last commit, or since it
// started when it has committed nothing yet.
func (s state) sinceCommit(now time.Time) time.Duration {
	ref := s.lastCommitAt
	if ref.IsZero() {
		ref = s.startedAt
	}
	if ref.IsZero() {
		return 0
	}
	return now.Sub(ref)
}
