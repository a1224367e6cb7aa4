package outbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// Intent is one committed intent record.
type Intent struct {
	ID        string
	Topic     string
	Partition int32
	Offset    int64
	Payload   []byte
}

// IdempotencyKey is the Idempotency-Key header of the intent with id: the
// same for every delivery attempt of the intent, by any worker, ever.
func IdempotencyKey(id string) string {
	h := sha256.Sum256([]byte("onceflow-outbox/v1\x00" + id))
	return "of1-" + hex.EncodeToString(h[:16])
}

// DeadLetter takes the intents whose delivery failed WithMaxAttempts
// times. It must be idempotent: after a crash it may see an intent again.
type DeadLetter interface {
	DeadLetter(ctx context.Context, in Intent, attempts int, lastErr error) error
}

// Position is an entry of the worker's checkpoint (positions/N): the next
// offset to read per partition of the topic and the running totals.
type Position struct {
	V            int              `json:"v"`
	Topic        string           `json:"topic"`
	Next         map[string]int64 `json:"next"`
	Delivered    int64            `json:"delivered"`
	DeadLettered int64            `json:"deadLettered"`
}

// Stats are a worker's figures.
type Stats struct {
	Delivered, FailedAttempts, DeadLettered int64
	// Lag per partition: the read_committed end offset minus the
	// worker's position.
	Lag map[int32]int64
}

// Worker delivers committed intents (see the package doc).
type Worker struct {
	cfg   config
	log   *offsetlog.Log[Position]
	round int64
	pos   Position
	src   intentSource
	sleep func(ctx context.Context, d time.Duration) error

	delivered, failed, dead atomic.Int64
	mu                      struct {
		sync.Mutex
		lag map[int32]int64
	}
	m *metrics
}

type metrics struct {
	delivered, failed, dead prometheus.Counter
	lag                     *prometheus.GaugeVec
}

// New checks the options and builds a worker; Run connects.
func New(opts ...Option) (*Worker, error) {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.deadLetter == nil {
		cfg.deadLetter = &storeDeadLetter{st: storage.Sub(cfg.cp, "deadletter")}
	}
	w := &Worker{cfg: cfg, log: offsetlog.New[Position](cfg.cp, "positions"), sleep: sleepCtx}
	if cfg.pg != nil {
		w.src = &pgSource{pool: cfg.pg, table: cfg.table, idField: cfg.idField}
	} else {
		w.src = &kafkaSource{cfg: &w.cfg}
	}
	w.mu.lag = map[int32]int64{}
	if cfg.reg != nil {
		m := &metrics{
			delivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "onceflow_outbox_delivered_total", Help: "Intents delivered (a 2xx answer)."}),
			failed:    prometheus.NewCounter(prometheus.CounterOpts{Name: "onceflow_outbox_failed_attempts_total", Help: "Delivery attempts that failed."}),
			dead:      prometheus.NewCounter(prometheus.CounterOpts{Name: "onceflow_outbox_dead_lettered_total", Help: "Intents sent to the dead letter."}),
			lag:       prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "onceflow_outbox_lag", Help: "Committed intents not yet delivered, per partition."}, []string{"partition"}),
		}
		for _, c := range []prometheus.Collector{m.delivered, m.failed, m.dead, m.lag} {
			if err := cfg.reg.Register(c); err != nil {
				return nil, fmt.Errorf("outbox: register metrics: %w", err)
			}
		}
		w.m = m
	}
	return w, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats returns the worker's figures so far. Safe to call during Run.
func (w *Worker) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	lag := make(map[int32]int64, len(w.mu.lag))
	for p, l := range w.mu.lag {
		lag[p] = l
	}
	return Stats{Delivered: w.delivered.Load(), FailedAttempts: w.failed.Load(), DeadLettered: w.dead.Load(), Lag: lag}
}

// start reads the checkpoint and opens the Kafka client at its positions.
func (w *Worker) start(ctx context.Context) error {
	id, pos, ok, err := w.log.Latest(ctx)
	if err != nil {
		return fmt.Errorf("outbox: read checkpoint: %w", err)
	}
	if ok {
		if pos.Topic != w.src.name() {
			return fmt.Errorf("outbox: the checkpoint (positions/%d) belongs to %q, this worker reads %q; use another checkpoint", id, pos.Topic, w.src.name())
		}
		w.round, w.pos = id, pos
	} else {
		w.round, w.pos = -1, Position{V: 1, Topic: w.src.name(), Next: map[string]int64{}}
	}
	return w.src.open(ctx, w.pos.Next)
}

// Close releases the Kafka client or ends the PostgreSQL reads.
func (w *Worker) Close() { w.src.close() }

// Run delivers intents until ctx ends (it then returns ctx's error), an
// error, or, under WithIdleExit, an idle period.
func (w *Worker) Run(ctx context.Context) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	idle := time.Now()
	for {
		ins, err := w.src.poll(ctx)
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if err != nil {
			return err
		}
		if len(ins) == 0 {
			w.updateLag(ctx)
			if w.cfg.idleExit > 0 && time.Since(idle) >= w.cfg.idleExit {
				return nil
			}
			continue
		}
		idle = time.Now()
		next := Position{V: 1, Topic: w.src.name(), Next: map[string]int64{}, Delivered: w.pos.Delivered, DeadLettered: w.pos.DeadLettered}
		for p, o := range w.pos.Next {
			next.Next[p] = o
		}
		for _, in := range ins {
			dead, err := w.deliver(ctx, in)
			if err != nil {
				return err
			}
			if dead {
				next.DeadLettered++
			} else {
				next.Delivered++
			}
			next.Next[strconv.Itoa(int(in.Partition))] = in.Offset + 1
		}
		if err := w.log.Add(ctx, w.round+1, next); err != nil {
			return fmt.Errorf("outbox: write positions/%d: %w", w.round+1, err)
		}
		w.round++
		w.pos = next
		if w.round >= int64(w.cfg.keep) && w.round%int64(w.cfg.keep) == 0 {
			if _, err := w.log.Purge(ctx, w.round-int64(w.cfg.keep)); err != nil {
				return fmt.Errorf("outbox: purge positions: %w", err)
			}
		}
		w.updateLag(ctx)
	}
}

// intentID is the id field of the JSON value, or where/partition/offset.
func intentID(value []byte, field, where string, partition int32, offset int64) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(value, &m) == nil {
		var s string
		if raw, ok := m[field]; ok && json.Unmarshal(raw, &s) == nil && s != "" {
			return s
		}
	}
	return fmt.Sprintf("%s/%d/%d", where, partition, offset)
}

// deliver POSTs in until a 2xx answer or the last attempt, which sends it
// to the dead letter (dead true).
func (w *Worker) deliver(ctx context.Context, in Intent) (dead bool, err error) {
	wait := w.cfg.backoff
	for attempt := 1; ; attempt++ {
		perr := w.post(ctx, in)
		if perr == nil {
			w.delivered.Add(1)
			if w.m != nil {
				w.m.delivered.Inc()
			}
			return false, nil
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		w.failed.Add(1)
		if w.m != nil {
			w.m.failed.Inc()
		}
		if attempt >= w.cfg.maxAttempts {
			if err := w.cfg.deadLetter.DeadLetter(ctx, in, attempt, perr); err != nil {
				return false, fmt.Errorf("outbox: dead letter of intent %q (%s[%d]@%d): %w", in.ID, in.Topic, in.Partition, in.Offset, err)
			}
			w.dead.Add(1)
			if w.m != nil {
				w.m.dead.Inc()
			}
			return true, nil
		}
		if err := w.sleep(ctx, wait); err != nil {
			return false, err
		}
		wait = min(2*wait, w.cfg.backoffMax)
	}
}

func (w *Worker) post(ctx context.Context, in Intent) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.endpoint.String(), bytes.NewReader(in.Payload))
	if err != nil {
		return fmt.Errorf("build request to %s: %v", w.cfg.endpoint.Redacted(), redactErr(err))
	}
	for k, vs := range w.cfg.headers {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", IdempotencyKey(in.ID))
	req.Header.Set("Onceflow-Intent-Id", in.ID)
	resp, err := w.cfg.client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %v", w.cfg.endpoint.Redacted(), redactErr(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: status %d: %s", w.cfg.endpoint.Redacted(), resp.StatusCode, bytes.TrimSpace(body))
	}
	return nil
}

// redactErr keeps the cause of an HTTP client error without the URL (the
// client's own error names it, with user info stripped; it is replaced by
// the redacted endpoint anyway).
func redactErr(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && ue.Unwrap() != nil {
		return ue.Unwrap()
	}
	return err
}

func (w *Worker) updateLag(ctx context.Context) {
	ends, err := w.src.ends(ctx)
	if err != nil {
		return // lag is a figure; the next round tries again
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, end := range ends {
		lag := max(0, end-w.pos.Next[strconv.Itoa(int(p))])
		w.mu.lag[p] = lag
		if w.m != nil {
			w.m.lag.WithLabelValues(strconv.Itoa(int(p))).Set(float64(lag))
		}
	}
}

// storeDeadLetter writes each dead intent once as JSON to
// <topic>-<partition>-<offset>.json.
type storeDeadLetter struct{ st storage.Store }

func (d *storeDeadLetter) DeadLetter(ctx context.Context, in Intent, attempts int, lastErr error) error {
	b, err := json.Marshal(map[string]any{
		"v": 1, "id": in.ID, "idempotencyKey": IdempotencyKey(in.ID), "topic": in.Topic, "partition": in.Partition,
		"offset": in.Offset, "attempts": attempts, "error": lastErr.Error(), "payload": string(in.Payload),
	})
	if err != nil {
		return err
	}
	err = d.st.PutIfAbsent(ctx, fmt.Sprintf("%s-%d-%020d.json", in.Topic, in.Partition, in.Offset), b)
	if storage.IsExist(err) {
		return nil
	}
	return err
}
