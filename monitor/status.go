package monitor

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

	"github.com/onceflow/onceflow/engine"
)

// Status is the JSON document /status serves.
type Status struct {
	ID                     string           `json:"id"`
	Name                   string           `json:"name"`
	RunID                  string           `json:"runId"`
	State                  string           `json:"state"` // "running" or "stopped"
	Trigger                string           `json:"trigger"`
	Started                string           `json:"started"`
	LastCommit             string           `json:"lastCommit,omitempty"`
	SecondsSinceLastCommit float64          `json:"secondsSinceLastCommit"`
	Healthy                bool             `json:"healthy"`
	HealthReason           string           `json:"healthReason,omitempty"`
	LastError              string           `json:"lastError,omitempty"`
	LastProgress           *engine.Progress `json:"lastProgress,omitempty"`
	// Tasks is what WithTasks' function returns: the tasks of a scaled-out
	// query this process owns.
	Tasks any `json:"tasks,omitempty"`
}

type statusServer struct {
	srv  *http.Server
	done chan struct{}
}

func startStatusServer(l *Listener) (*statusServer, error) {
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return nil, fmt.Errorf("monitor: status server: listen on %s: %w", l.addr, err)
	}
	mux := http.NewServeMux()
	if g, ok := l.reg.(prometheus.Gatherer); ok {
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
		_ = enc.Encode(l.status())
	})
	addPageRoutes(mux, l)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		st := l.status()
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
	l.mu.Lock()
	l.mu.listenAddr = ln.Addr().String()
	l.mu.Unlock()
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

func (l *Listener) status() Status {
	return l.statusOf(l.state(), l.now())
}

func (l *Listener) statusOf(st state, now time.Time) Status {
	out := Status{
		ID: st.queryID, Name: st.name, RunID: st.runID, State: "stopped",
		Trigger:                st.trigger,
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
	out.Healthy, out.HealthReason = l.rule.check(st, now)
	if l.tasks != nil {
		out.Tasks = l.tasks()
	}
	return out
}
