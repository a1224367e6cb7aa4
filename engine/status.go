package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HealthRule says when /healthz answers 503. The query is unhealthy when
// its driver is not running, or when the time since its last commit (or
// since it started, before its first commit) exceeds
//
//	max(Intervals × trigger interval, MinAge)
//
// where the trigger interval is Every's d or the gap between two ticks of a
// schedule (0 for Every(0), Once and AvailableNow, leaving MinAge). MaxAge,
// when set, replaces that formula. An idle source produces no batch and
// so no commit: set the rule to the quietest period the data may have, or
// Disabled to check only that the driver runs.
type HealthRule struct {
	// Intervals is how many trigger intervals may pass without a commit.
	// Default 10.
	Intervals int
	// MinAge is the least age that is unhealthy. Default 5 minutes.
	MinAge time.Duration
	// MaxAge, when positive, is the age that is unhealthy, whatever the
	// trigger.
	MaxAge time.Duration
	// Disabled turns the age check off.
	Disabled bool
}

// Defaults of HealthRule.
const (
	DefaultHealthIntervals = 10
	DefaultHealthMinAge    = 5 * time.Minute
)

func (h HealthRule) maxAge(interval time.Duration) time.Duration {
	if h.MaxAge > 0 {
		return h.MaxAge
	}
	n := h.Intervals
	if n <= 0 {
		n = DefaultHealthIntervals
	}
	floor := h.MinAge
	if floor <= 0 {
		floor = DefaultHealthMinAge
	}
	return max(time.Duration(n)*interval, floor)
}

// WithStatusServer serves the query's status over HTTP on addr
// ("127.0.0.1:0" picks a free port; Query.StatusAddr tells which) from
// when Run has opened the checkpoint until Run returns:
//
//	/metrics  the Prometheus metrics (WithMetrics' registry when it is
//	          also a Gatherer, else a private registry)
//	/status   JSON: query id, name, run id, state, last progress, last
//	          error, seconds since the last commit, health
//	/healthz  200 "ok", or 503 with the reason (see HealthRule)
//
// A failure to listen fails Run. Default: no server.
func WithStatusServer(addr string) Option {
	return func(c *config) { monitorOf(c).addr = addr }
}

// WithHealthRule sets when /healthz reports the query unhealthy. Default:
// HealthRule{} (10 trigger intervals, at least 5 minutes).
func WithHealthRule(r HealthRule) Option {
	return func(c *config) { monitorOf(c).rule = r }
}

// StatusAddr returns the address the status server listens on while Run
// runs, or "" when there is none.
func (q *Query) StatusAddr() string {
	for _, o := range q.cfg.observers {
		if m, ok := o.(*monitor); ok {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.mu.listenAddr
		}
	}
	return ""
}

// Status is the JSON document /status serves.
type Status struct {
	ID                     string    `json:"id"`
	Name                   string    `json:"name"`
	RunID                  string    `json:"runId"`
	State                  string    `json:"state"` // "running" or "stopped"
	Trigger                string    `json:"trigger"`
	Started                string    `json:"started"`
	LastCommit             string    `json:"lastCommit,omitempty"`
	SecondsSinceLastCommit float64   `json:"secondsSinceLastCommit"`
	Healthy                bool      `json:"healthy"`
	HealthReason           string    `json:"healthReason,omitempty"`
	LastError              string    `json:"lastError,omitempty"`
	LastProgress           *Progress `json:"lastProgress,omitempty"`
}

type statusServer struct {
	srv  *http.Server
	done chan struct{}
}

func startStatusServer(m *monitor) (*statusServer, error) {
	ln, err := net.Listen("tcp", m.addr)
	if err != nil {
		return nil, fmt.Errorf("engine: status server: listen on %s: %w", m.addr, err)
	}
	mux := http.NewServeMux()
	if g, ok := m.reg.(prometheus.Gatherer); ok {
		mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	} else {
		mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "the registry given to WithMetrics cannot be gathered; serve it yourself", http.StatusNotFound)
		})
	}
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(m.status())
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		st := m.status()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !st.Healthy {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, st.HealthReason)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	s := &statusServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		done: make(chan struct{}),
	}
	m.mu.Lock()
	m.mu.listenAddr = ln.Addr().String()
	m.mu.Unlock()
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // ErrServerClosed after shutdown
	}()
	return s, nil
}

// shutdown stops the server, letting requests in flight finish for up to
// two seconds, and waits for its goroutine.
func (s *statusServer) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = s.srv.Close()
	}
	<-s.done
}

func (m *monitor) status() Status {
	st := m.state()
	now := m.now()
	out := Status{
		ID: st.queryID, Name: st.name, RunID: st.runID, State: "stopped",
		Trigger:                m.cfg.trigger.String(),
		Started:                st.startedAt.UTC().Format(time.RFC3339Nano),
		SecondsSinceLastCommit: st.sinceCommit(now).Seconds(),
		LastProgress:           st.last,
	}
	if st.running {
		out.State = "running"
	}
	if !st.lastCommitAt.IsZero() {
		out.LastCommit = st.lastCommitAt.UTC().Format(time.RFC3339Nano)
	}
	if st.lastErr != nil {
		out.LastError = st.lastErr.Error()
	}
	out.Healthy, out.HealthReason = m.rule.check(st, now)
	return out
}

func (h HealthRule) check(st monitorState, now time.Time) (bool, string) {
	if !st.running {
		return false, "the query's driver is not running"
	}
	if h.Disabled {
		return true, ""
	}
	age, limit := st.sinceCommit(now), h.maxAge(st.interval)
	if age > limit {
		what := "the last commit"
		if st.lastCommitAt.IsZero() {
			what = "the start, with no commit since,"
		}
		return false, fmt.Sprintf("%s was %s ago, more than the %s the health rule allows", what, age.Round(time.Millisecond), limit)
	}
	return true, ""
}
