package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/cron"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
)

// metricValue returns the value of the series of family name whose labels
// include want, or an error naming what is there.
func metricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, error) {
	f, ok := fams[name]
	if !ok {
		return 0, fmt.Errorf("no metric %s", name)
	}
	var seen []string
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		seen = append(seen, fmt.Sprint(got))
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), nil
		case m.Gauge != nil:
			return m.Gauge.GetValue(), nil
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), nil
		}
	}
	return 0, fmt.Errorf("%s has no series %v (has %v)", name, want, seen)
}

func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestMetricsAndStatusServer(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	reg := prometheus.NewRegistry()
	cp := localStore(t)
	src := newSeq(25, 10, 3)
	stream := engine.ReadStream(src).GroupBy("key").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"))
	clock := newFakeNow()
	mon := New(WithMetrics(reg), WithStatusServer("127.0.0.1:0"), WithHealthRule(HealthRule{MaxAge: time.Minute}))
	mon.now = clock.now
	var q *engine.Query
	type seen struct {
		fams    map[string]*dto.MetricFamily
		status  Status
		health  int
		stale   int
		reason  string
		healthz string
	}
	var during seen
	q, err := engine.NewQuery(stream, engine.WithName("payments"), engine.WithCheckpoint(cp), engine.WithSink(memsink.New("out")),
		engine.WithTrigger(engine.AvailableNow()), engine.WithStatePartitions(2), engine.WithListener(mon),
		engine.WithProgressListener(func(p engine.Progress) {
			if p.BatchID != 2 {
				return
			}
			base := "http://" + mon.StatusAddr()
			during.fams = scrape(t, base+"/metrics")
			code, body := get(t, base+"/status")
			if code != 200 || json.Unmarshal([]byte(body), &during.status) != nil {
				t.Errorf("/status: %d %s", code, body)
			}
			during.health, during.healthz = get(t, base+"/healthz")
			clock.add(2 * time.Minute) // no commit for longer than the rule allows
			during.stale, during.reason = get(t, base+"/healthz")
			clock.add(-2 * time.Minute)
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if during.fams == nil {
		t.Fatal("the listener never scraped")
	}
	q1 := map[string]string{"query": "payments"}
	with := func(k, v string) map[string]string { return map[string]string{"query": "payments", k: v} }
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"onceflow_input_rows_total", with("source", "seq"), 25},
		{"onceflow_output_rows_total", with("sink", "memory[out]"), 3 + 3 + 3},
		{"onceflow_batches_total", q1, 3},
		{"onceflow_last_committed_batch_id", q1, 2},
		{"onceflow_query_running", q1, 1},
		{"onceflow_batch_duration_seconds", q1, 3}, // sample count
		{"onceflow_state_rows", with("operator", "totals"), 3},
		{"onceflow_late_rows_dropped_total", with("operator", "totals"), 0},
		{"onceflow_recovered_batches_total", q1, 0},
		{"onceflow_seconds_since_last_commit", q1, 0}, // the fake clock did not move since the commit
	} {
		got, err := metricValue(during.fams, c.name, c.labels)
		if err != nil {
			t.Error(err)
			continue
		}
		if got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if v, err := metricValue(during.fams, "onceflow_state_memory_bytes", with("operator", "totals")); err != nil || v <= 0 {
		t.Errorf("state memory bytes %v, %v", v, err)
	}
	st := during.status
	if st.Name != "payments" || st.State != "running" || st.ID == "" || st.ID != q.ID() || st.RunID == "" ||
		st.LastProgress == nil || st.LastProgress.BatchID != 2 || !st.Healthy || st.Trigger != "available-now" {
		t.Errorf("status %+v", st)
	}
	if during.health != 200 || strings.TrimSpace(during.healthz) != "ok" {
		t.Errorf("/healthz while fresh: %d %q", during.health, during.healthz)
	}
	if during.stale != 503 || !strings.Contains(during.reason, "the last commit was 2m0s ago, more than the 1m0s") {
		t.Errorf("/healthz when stale: %d %q", during.stale, during.reason)
	}
	// After Run: the server is gone, the metrics stay with running = 0.
	if a := mon.StatusAddr(); a != "" {
		t.Errorf("StatusAddr after Run = %q", a)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	if v, err := metricValue(byName, "onceflow_query_running", q1); err != nil || v != 0 {
		t.Errorf("running after Run: %v %v", v, err)
	}
}

func TestMetricsRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	start := func(l *Listener, id, name string) error {
		return l.OnQueryStart(engine.QueryInfo{ID: id, RunID: "run-" + id, Name: name, Trigger: engine.Once()})
	}
	a := New(WithMetrics(reg))
	if err := start(a, "a", "orders"); err != nil {
		t.Fatal(err)
	}
	// A second running query of the same name: a clear error, no panic.
	b := New(WithMetrics(reg))
	err := start(b, "b", "orders")
	if !errors.Is(err, engine.ErrConcurrentDriver) || !strings.Contains(err.Error(), `metrics of query "orders" are already registered by a running query`) {
		t.Fatalf("second registration: %v", err)
	}
	if st := b.status(); st.State != "stopped" || st.LastError != err.Error() {
		t.Fatalf("after a failed start: state %s, last error %q", st.State, st.LastError)
	}
	// Another name is fine.
	c := New(WithMetrics(reg))
	if err := start(c, "c", "refunds"); err != nil {
		t.Fatal(err)
	}
	// Once the first stopped, a restart of the same name takes over.
	a.OnQueryStop(nil)
	d := New(WithMetrics(reg))
	if err := start(d, "d", "orders"); err != nil {
		t.Fatalf("restart after stop: %v", err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

func TestStatusServerAddressInUse(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	a := New(WithStatusServer("127.0.0.1:0"))
	if err := a.OnQueryStart(engine.QueryInfo{ID: "id", RunID: "run", Name: "q", Trigger: engine.Once()}); err != nil {
		t.Fatal(err)
	}
	addr := a.StatusAddr()
	b := New(WithStatusServer(addr))
	if err := b.OnQueryStart(engine.QueryInfo{ID: "id2", RunID: "run2", Name: "q2", Trigger: engine.Once()}); err == nil || !strings.Contains(err.Error(), "monitor: status server: listen on "+addr) {
		t.Fatalf("second listener on %s: %v", addr, err)
	}
	a.OnQueryStop(nil)
}

func TestHealthRule(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		rule     HealthRule
		st       state
		now      time.Duration // after t0
		ok       bool
		reasonIn string
	}{
		{"not running", HealthRule{}, state{startedAt: t0}, 0, false, "not running"},
		{"fresh", HealthRule{}, state{running: true, startedAt: t0, lastCommitAt: t0, interval: time.Minute}, 9 * time.Minute, true, ""},
		{"ten intervals", HealthRule{}, state{running: true, startedAt: t0, lastCommitAt: t0, interval: time.Minute}, 11 * time.Minute, false, "more than the 10m0s"},
		{"floor for short intervals", HealthRule{}, state{running: true, startedAt: t0, lastCommitAt: t0, interval: time.Second}, 4 * time.Minute, true, ""},
		{"custom intervals", HealthRule{Intervals: 3, MinAge: time.Second}, state{running: true, startedAt: t0, lastCommitAt: t0, interval: time.Second}, 4 * time.Second, false, "more than the 3s"},
		{"no commit yet counts from the start", HealthRule{MaxAge: time.Minute}, state{running: true, startedAt: t0}, 2 * time.Minute, false, "the start, with no commit since,"},
		{"disabled", HealthRule{Disabled: true}, state{running: true, startedAt: t0}, 100 * time.Hour, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := tc.rule.check(tc.st, t0.Add(tc.now))
			if ok != tc.ok || !strings.Contains(reason, tc.reasonIn) {
				t.Fatalf("check = %v %q, want %v containing %q", ok, reason, tc.ok, tc.reasonIn)
			}
		})
	}
	// A schedule's interval is the gap between its ticks.
	l := New()
	l.now = func() time.Time { return t0 }
	if err := l.OnQueryStart(engine.QueryInfo{Trigger: engine.Scheduled(cron.Every(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	if d := l.state().interval; d != time.Hour {
		t.Fatalf("schedule interval %s", d)
	}
}

// partitionStats has the shape of the Kafka source's PartitionStats.
type partitionStats struct {
	Topic     string
	Partition int32
	Lag       int64
}

func TestSourceLag(t *testing.T) {
	cases := []struct {
		name string
		m    map[string]any
		want string
	}{
		{"none", nil, "map[]"},
		{"kafka structs", map[string]any{"partitions": []partitionStats{{"pay", 0, 5}, {"pay", 1, 0}}}, "map[pay/0:5 pay/1:0]"},
		{"decoded json", map[string]any{"partitions": []any{map[string]any{"topic": "t", "partition": 2.0, "lag": 7.0}}}, "map[t/2:7]"},
		{"lag map", map[string]any{"lag": map[string]int64{"a": 1, "b": 2}}, "map[a:1 b:2]"},
		{"unrelated", map[string]any{"deadLetters": 3, "partitions": "x"}, "map[]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := sourceLag(tc.m)
			if got == nil {
				got = map[string]float64{}
			}
			if fmt.Sprint(got) != tc.want {
				t.Fatalf("sourceLag = %v, want %s", got, tc.want)
			}
		})
	}
}

// lagSource reports per-partition lag the way the Kafka source's stats
// read.
type lagSource struct {
	*seqSource
	lags []partitionStats
}

func (l *lagSource) Metrics() map[string]any { return map[string]any{"partitions": l.lags} }

func TestMetricsLagSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	src := &lagSource{seqSource: newSeq(30, 10, 3), lags: []partitionStats{{"pay", 0, 20}, {"pay", 1, 5}}}
	q, err := engine.NewQuery(engine.ReadStream(src), engine.WithName("lagged"), engine.WithCheckpoint(localStore(t)), engine.WithSink(memsink.New("o")),
		engine.WithTrigger(engine.AvailableNow()), engine.WithListener(New(WithMetrics(reg))),
		engine.WithProgressListener(func(p engine.Progress) {
			// Partition 1 goes away after batch 0; partition 0 catches up.
			src.lags = []partitionStats{{"pay", 0, 20 - 10*(p.BatchID+1)}}
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	lag := byName["onceflow_source_lag"]
	if lag == nil || len(lag.GetMetric()) != 1 {
		t.Fatalf("lag series %v, want only pay/0", lag)
	}
	if v, err := metricValue(byName, "onceflow_source_lag", map[string]string{"query": "lagged", "source": "seq", "partition": "pay/0"}); err != nil || v != 0 {
		t.Fatalf("lag of pay/0 = %v, %v; want 0 after the last batch", v, err)
	}
}

// Two running queries of one name on one registry: the second fails to
// start, and a restart of the first after it stopped works.
func TestMetricsConflictFailsRun(t *testing.T) {
	reg := prometheus.NewRegistry()
	bs := &blockingSink{entered: make(chan struct{}, 1), release: make(chan struct{})}
	q1, err := engine.NewQuery(engine.ReadStream(newSeq(10, 0, 2)), engine.WithName("dup"), engine.WithCheckpoint(localStore(t)), engine.WithSink(bs),
		engine.WithTrigger(engine.Once()), engine.WithListener(New(WithMetrics(reg))))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- q1.Run(context.Background()) }()
	<-bs.entered
	q2, err := engine.NewQuery(engine.ReadStream(newSeq(10, 0, 2)), engine.WithName("dup"), engine.WithCheckpoint(localStore(t)), engine.WithSink(memsink.New("b")),
		engine.WithTrigger(engine.Once()), engine.WithListener(New(WithMetrics(reg))))
	if err != nil {
		t.Fatal(err)
	}
	err = q2.Run(context.Background())
	close(bs.release)
	if err1 := <-done; err1 != nil {
		t.Fatal(err1)
	}
	if !errors.Is(err, engine.ErrConcurrentDriver) || !strings.Contains(err.Error(), `metrics of query "dup" are already registered by a running query`) {
		t.Fatalf("second query: %v", err)
	}
	// q1 stopped: running it again re-registers its own metrics.
	if err := q1.Run(context.Background()); err != nil {
		t.Fatalf("re-run of the first query: %v", err)
	}
}

// One Listener given to two queries: the second fails to start and leaves
// the first's status, metrics and server alone.
func TestListenerServesOneQueryAtATime(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	reg := prometheus.NewRegistry()
	mon := New(WithMetrics(reg), WithStatusServer("127.0.0.1:0"))
	bs := &blockingSink{entered: make(chan struct{}, 1), release: make(chan struct{})}
	q1, err := engine.NewQuery(engine.ReadStream(newSeq(10, 0, 2)), engine.WithName("first"), engine.WithCheckpoint(localStore(t)), engine.WithSink(bs),
		engine.WithTrigger(engine.Once()), engine.WithListener(mon))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- q1.Run(context.Background()) }()
	<-bs.entered
	addr := mon.StatusAddr()
	out := memsink.New("b")
	q2, err := engine.NewQuery(engine.ReadStream(newSeq(10, 0, 2)), engine.WithName("second"), engine.WithCheckpoint(localStore(t)), engine.WithSink(out),
		engine.WithTrigger(engine.Once()), engine.WithListener(mon))
	if err != nil {
		t.Fatal(err)
	}
	err = q2.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), `already serves the running query "first"`) {
		t.Fatalf("second query on the same Listener: %v", err)
	}
	if ids := out.BatchIDs(); len(ids) != 0 {
		t.Fatalf("the second query ran batches %v", ids)
	}
	if st := mon.status(); st.Name != "first" || st.State != "running" || mon.StatusAddr() != addr || addr == "" {
		t.Fatalf("the first query's status changed: %+v at %q (was %q)", st, mon.StatusAddr(), addr)
	}
	if code, _ := get(t, "http://"+addr+"/healthz"); code != 200 {
		t.Fatalf("/healthz of the first query: %d", code)
	}
	close(bs.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// After the first returned, the Listener may serve the second.
	if err := q2.Run(context.Background()); err != nil {
		t.Fatalf("second query after the first stopped: %v", err)
	}
}
