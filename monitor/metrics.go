package monitor

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceflow/onceflow/engine"
)

// queryMetrics are one query's collectors, registered as one Collector.
type queryMetrics struct {
	name string
	mon  *Listener

	running, sinceCommit            prometheus.GaugeFunc
	lastBatchID, lastDuration       prometheus.Gauge
	duration                        prometheus.Histogram
	batches, recovered              prometheus.Counter
	inputRows, outputRows, lateRows *prometheus.CounterVec
	lag, stateRows, stateBytes      *prometheus.GaugeVec
	lagSeries                       map[[2]string]bool
	all                             []prometheus.Collector
}

func newQueryMetrics(name string, mon *Listener) *queryMetrics {
	cl := prometheus.Labels{"query": name}
	opts := func(n, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "onceflow", Name: n, Help: help, ConstLabels: cl}
	}
	q := &queryMetrics{name: name, mon: mon, lagSeries: map[[2]string]bool{}}
	q.running = prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("query_running", "1 while the query's Run is running, 0 after it returned.")), func() float64 {
		if mon.state().running {
			return 1
		}
		return 0
	})
	q.sinceCommit = prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("seconds_since_last_commit", "Seconds since this run's last committed batch, or since the run started if it committed none.")), func() float64 {
		return mon.state().sinceCommit(mon.now()).Seconds()
	})
	q.lastBatchID = prometheus.NewGauge(prometheus.GaugeOpts(opts("last_committed_batch_id", "Id of the newest committed batch (-1 before any).")))
	q.lastBatchID.Set(-1)
	q.lastDuration = prometheus.NewGauge(prometheus.GaugeOpts(opts("last_batch_duration_seconds", "Duration of the newest committed batch.")))
	q.duration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "onceflow", Name: "batch_duration_seconds", Help: "Durations of committed batches.", ConstLabels: cl,
		Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12), // 5ms … ~20 min
	})
	q.batches = prometheus.NewCounter(prometheus.CounterOpts(opts("batches_total", "Batches committed.")))
	q.recovered = prometheus.NewCounter(prometheus.CounterOpts(opts("recovered_batches_total", "Batches re-run from the write-ahead log after a restart.")))
	q.inputRows = prometheus.NewCounterVec(prometheus.CounterOpts(opts("input_rows_total", "Rows read from each source.")), []string{"source"})
	q.outputRows = prometheus.NewCounterVec(prometheus.CounterOpts(opts("output_rows_total", "Rows handed to each sink.")), []string{"sink"})
	q.lateRows = prometheus.NewCounterVec(prometheus.CounterOpts(opts("late_rows_dropped_total", "Rows a stateful operator dropped as older than the watermark.")), []string{"operator"})
	q.lag = prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("source_lag", "Records available in a source partition and not yet planned into a batch.")), []string{"source", "partition"})
	q.stateRows = prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("state_rows", "Live rows in a stateful operator's state.")), []string{"operator"})
	q.stateBytes = prometheus.NewGaugeVec(prometheus.GaugeOpts(opts("state_memory_bytes", "Memory used by a stateful operator's working state.")), []string{"operator"})
	q.all = []prometheus.Collector{q.running, q.sinceCommit, q.lastBatchID, q.lastDuration, q.duration, q.batches, q.recovered,
		q.inputRows, q.outputRows, q.lateRows, q.lag, q.stateRows, q.stateBytes}
	return q
}

func (q *queryMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range q.all {
		c.Describe(ch)
	}
}

func (q *queryMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range q.all {
		c.Collect(ch)
	}
}

// register registers q on reg. The metrics of a stopped query of the same
// name are taken over; those of a running one are a conflict.
func (q *queryMetrics) register(reg prometheus.Registerer) error {
	err := reg.Register(q)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if are.ExistingCollector == prometheus.Collector(q) {
			return nil // this query's own, from an earlier Run
		}
		if old, ok := are.ExistingCollector.(*queryMetrics); ok && !old.mon.state().running {
			reg.Unregister(old)
			err = reg.Register(q)
		}
		if errors.As(err, &are) {
			return fmt.Errorf("%w: metrics of query %q are already registered by a running query on this registry; give each query its own name (engine.WithName)", engine.ErrConcurrentDriver, q.name)
		}
	}
	if err != nil {
		return fmt.Errorf("monitor: register metrics of query %q: %w", q.name, err)
	}
	return nil
}

func (q *queryMetrics) observe(p *engine.Progress) {
	q.batches.Inc()
	q.lastBatchID.Set(float64(p.BatchID))
	d := time.Duration(p.BatchDurationMs) * time.Millisecond
	q.lastDuration.Set(d.Seconds())
	q.duration.Observe(d.Seconds())
	seen := map[[2]string]bool{}
	for _, s := range p.Sources {
		q.inputRows.WithLabelValues(s.Description).Add(float64(s.NumInputRows))
		for part, lag := range sourceLag(s.Metrics) {
			k := [2]string{s.Description, part}
			seen[k] = true
			q.lag.WithLabelValues(k[0], k[1]).Set(lag)
		}
	}
	for k := range q.lagSeries {
		if !seen[k] {
			q.lag.DeleteLabelValues(k[0], k[1])
		}
	}
	q.lagSeries = seen
	for _, s := range p.Sinks {
		q.outputRows.WithLabelValues(s.Description).Add(float64(s.NumOutputRows))
	}
	for _, op := range p.StateOperators {
		q.stateRows.WithLabelValues(op.OperatorID).Set(float64(op.NumRowsTotal))
		q.stateBytes.WithLabelValues(op.OperatorID).Set(float64(op.MemoryUsedBytes))
		q.lateRows.WithLabelValues(op.OperatorID).Add(float64(op.NumRowsDroppedByWatermark))
	}
}

// sourceLag reads per-partition lag out of a source's metrics (see
// WithMetrics). Values are round-tripped through JSON so Go structs and
// decoded JSON read alike.
func sourceLag(m map[string]any) map[string]float64 {
	if len(m) == 0 {
		return nil
	}
	out := map[string]float64{}
	for k, v := range m {
		switch strings.ToLower(k) {
		case "partitions":
			var parts []map[string]json.RawMessage
			if b, err := json.Marshal(v); err != nil || json.Unmarshal(b, &parts) != nil {
				continue
			}
			for _, p := range parts {
				var lag float64
				if !jsonNumber(member(p, "lag"), &lag) {
					continue
				}
				name := jsonText(member(p, "partition"))
				if t := jsonText(member(p, "topic")); t != "" {
					name = t + "/" + name
				}
				out[name] = lag
			}
		case "lag":
			var lags map[string]float64
			if b, err := json.Marshal(v); err != nil || json.Unmarshal(b, &lags) != nil {
				continue
			}
			for p, l := range lags {
				out[p] = l
			}
		}
	}
	return out
}

func member(m map[string]json.RawMessage, name string) json.RawMessage {
	if v, ok := m[name]; ok {
		return v
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.EqualFold(k, name) {
			return m[k]
		}
	}
	return nil
}

func jsonNumber(raw json.RawMessage, f *float64) bool {
	return raw != nil && json.Unmarshal(raw, f) == nil
}

func jsonText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return string(raw)
}
