package kafkasink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/contract"
	"github.com/onceflow/onceflow/internal/fault"
)

var (
	_ contract.Sink              = (*Sink)(nil)
	_ contract.SinkStarter       = (*Sink)(nil)
	_ contract.GuaranteeReporter = (*Sink)(nil)
	_ contract.SchemaValidator   = (*Sink)(nil)
	_ contract.SinkPosition      = (*Sink)(nil)
	_ contract.Describer         = (*Sink)(nil)
)

// HeaderBatch is the header every output record carries: the batch id in
// decimal.
const HeaderBatch = "onceflow-batch"

// Sink writes each batch to a Kafka topic in one transaction together with
// a batch marker. See the package documentation.
type Sink struct {
	c      config
	admCl  *kgo.Client // plain client: admin requests, progress reads, at-least-once produce
	adm    *kadm.Client
	decomp kgo.Decompressor

	skipped atomic.Int64

	// beforeCommit, when set (tests only), runs between produce and
	// commit.
	beforeCommit func()

	mu struct {
		sync.Mutex
		started   bool
		queryID   string
		txnID     string
		cl        *kgo.Client // transactional producer; nil when it must be re-initialised
		last      int64       // highest committed batch id, -1 for none
		fenced    error
		committed int64 // batches committed by this instance
	}
	txnID   string // copies of mu.txnID and mu.queryID for progress reads, set in Start
	queryID string
}

// New validates the options and creates the admin client. It does not
// contact the brokers; Start does.
func New(opts ...Option) (*Sink, error) {
	c := defaults()
	for _, o := range opts {
		o(&c)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.name == "" {
		c.name = c.topic
	}
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return nil, fmt.Errorf("kafkasink: client: %w", err)
	}
	s := &Sink{c: c, admCl: cl, adm: kadm.NewClient(cl), decomp: kgo.DefaultDecompressor()}
	s.mu.last = -1
	return s, nil
}

func (c *config) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(c.brokers...)}
	if c.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(c.tls))
	}
	if c.sasl != nil {
		opts = append(opts, kgo.SASL(c.sasl))
	}
	opts = append(opts, extra...)
	return append(opts, c.extra...)
}

// Guarantee reports contract.ExactlyOnce, or contract.AtLeastOnce under
// the WithAtLeastOnce option.
func (s *Sink) Guarantee() contract.Guarantee {
	if s.c.atLeastOnce {
		return contract.AtLeastOnce
	}
	return contract.ExactlyOnce
}

// Description is "kafka[topic]".
func (s *Sink) Description() string { return "kafka[" + s.c.topic + "]" }

// TransactionalID returns the transactional id chosen at Start.
func (s *Sink) TransactionalID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.txnID
}

// Skipped counts AddBatch calls skipped because the batch was already
// committed.
func (s *Sink) Skipped() int64 { return s.skipped.Load() }

// LastCommitted returns the highest batch id known committed, -1 for none.
func (s *Sink) LastCommitted() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.last
}

// LastBatchID reports the newest committed batch marker Start found (or a
// later AddBatch committed).
func (s *Sink) LastBatchID(context.Context) (int64, bool, error) {
	id := s.LastCommitted()
	return id, id >= 0, nil
}

// Start checks the configuration against the cluster, initialises the
// transactional producer (fencing any older instance with the same
// transactional id and aborting its open transaction) and reads the last
// committed batch marker. It may be called again after ErrFenced.
func (s *Sink) Start(ctx context.Context, queryID string) error {
	if queryID == "" {
		return fmt.Errorf("%w: empty query id", ErrConfig)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkTopic(ctx); err != nil {
		return err
	}
	s.mu.queryID = queryID
	s.mu.started = true
	if s.c.atLeastOnce {
		return nil
	}
	txnID := s.c.txnID
	if txnID == "" {
		txnID = "onceflow-" + queryID + "-" + s.c.name
	}
	s.mu.txnID, s.txnID, s.queryID = txnID, txnID, queryID
	if err := s.checkTimeout(ctx); err != nil {
		return err
	}
	if err := s.ensureProgressTopic(ctx); err != nil {
		return fmt.Errorf("kafkasink: start: %w", err)
	}
	s.mu.fenced = nil
	if err := s.initLocked(ctx); err != nil {
		return fmt.Errorf("kafkasink: start: %w", err)
	}
	return nil
}

func (s *Sink) checkTopic(ctx context.Context) error {
	tds, err := s.adm.ListTopics(ctx, s.c.topic)
	if err != nil {
		return fmt.Errorf("kafkasink: start: describe topic %q: %w", s.c.topic, err)
	}
	if td, ok := tds[s.c.topic]; !ok || td.Err != nil {
		return fmt.Errorf("kafkasink: start: output topic %q does not exist", s.c.topic)
	}
	return nil
}

// checkTimeout refuses a transaction timeout above the broker's
// transaction.max.timeout.ms.
func (s *Sink) checkTimeout(ctx context.Context) error {
	// Each broker, not the cluster default: a static setting from the
	// broker's properties file is only reported per broker.
	brokers, err := s.adm.ListBrokers(ctx)
	if err != nil {
		return fmt.Errorf("kafkasink: start: list brokers: %w", err)
	}
	rcs, err := s.adm.DescribeBrokerConfigs(ctx, brokers.NodeIDs()...)
	if err != nil {
		return fmt.Errorf("kafkasink: start: describe broker configs: %w", err)
	}
	want := s.c.timeout.Milliseconds()
	found := false
	for _, rc := range rcs {
		if rc.Err != nil {
			return fmt.Errorf("kafkasink: start: describe broker %s configs: %w", rc.Name, rc.Err)
		}
		for _, cfg := range rc.Configs {
			if cfg.Key != "transaction.max.timeout.ms" || cfg.Value == nil {
				continue
			}
			maxMs, err := strconv.ParseInt(*cfg.Value, 10, 64)
			if err != nil {
				return fmt.Errorf("kafkasink: start: broker %s transaction.max.timeout.ms %q: %w", rc.Name, *cfg.Value, err)
			}
			found = true
			if want > maxMs {
				return fmt.Errorf("%w: WithTransactionTimeout is %d ms, broker %s has transaction.max.timeout.ms=%d; lower the timeout or raise the broker's maximum",
					ErrTimeoutTooLarge, want, rc.Name, maxMs)
			}
		}
	}
	if !found {
		// InitProducerID still refuses a timeout above the maximum.
		s.c.logger.Warn("kafkasink: brokers do not report transaction.max.timeout.ms; the timeout is checked by InitProducerID only",
			"timeoutMs", want)
	}
	return nil
}

// initLocked creates the transactional producer, runs InitProducerID and
// reads the last committed marker.
func (s *Sink) initLocked(ctx context.Context) error {
	if s.mu.cl != nil {
		s.mu.cl.Close()
		s.mu.cl = nil
	}
	cl, err := kgo.NewClient(s.c.clientOpts(
		kgo.TransactionalID(s.mu.txnID),
		kgo.TransactionTimeout(s.c.timeout),
	)...)
	if err != nil {
		return fmt.Errorf("transactional client: %w", err)
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return fmt.Errorf("init producer id for %q: %w", s.mu.txnID, err)
	}
	last, err := s.lastCommitted(ctx)
	if err != nil {
		cl.Close()
		return fmt.Errorf("read progress of %q: %w", s.mu.txnID, err)
	}
	s.mu.cl = cl
	s.mu.last = last
	return nil
}

// AddBatch writes batch batchID once. A committed marker at or above
// batchID means the batch is already visible: the call is skipped. A
// failed attempt is aborted and returns the error; the next call
// re-initialises the producer and re-reads the marker, so a commit whose
// outcome was unknown is neither lost nor duplicated.
func (s *Sink) AddBatch(ctx context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mu.started {
		return ErrNotStarted
	}
	if s.c.atLeastOnce {
		recs, err := s.encode(batchID, schema, records)
		if err != nil {
			return fmt.Errorf("kafkasink: batch %d: %w", batchID, err)
		}
		if err := s.admCl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("kafkasink: batch %d: produce: %w", batchID, err)
		}
		return nil
	}
	if s.mu.fenced != nil {
		return fmt.Errorf("kafkasink: batch %d: %w", batchID, s.mu.fenced)
	}
	if s.mu.cl == nil {
		if err := s.initLocked(ctx); err != nil {
			return fmt.Errorf("kafkasink: batch %d: re-initialise: %w", batchID, err)
		}
	}
	if batchID <= s.mu.last {
		s.skipped.Add(1)
		s.c.logger.Info("kafkasink: batch already committed; skipping", "batch", batchID, "lastCommitted", s.mu.last, "transactionalId", s.mu.txnID)
		return nil
	}
	recs, err := s.encode(batchID, schema, records)
	if err != nil {
		return fmt.Errorf("kafkasink: batch %d: %w", batchID, err)
	}
	mv, _ := json.Marshal(marker{Version: 1, BatchID: batchID, Query: s.mu.queryID, Sink: s.c.name})
	recs = append(recs, &kgo.Record{Topic: s.c.progressTopic, Key: []byte(s.mu.txnID), Value: mv})
	if err := s.transact(ctx, recs); err != nil {
		return fmt.Errorf("kafkasink: batch %d: %w", batchID, s.fail(ctx, err))
	}
	s.mu.last = batchID
	s.mu.committed++
	fault.Point(fault.KafkaSinkAfterCommit)
	return nil
}

// transact produces recs in one transaction and commits it.
func (s *Sink) transact(ctx context.Context, recs []*kgo.Record) error {
	cl := s.mu.cl
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	fault.Point(fault.KafkaSinkAfterProduce)
	if s.beforeCommit != nil {
		s.beforeCommit()
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// fail aborts what can be aborted and drops the producer, so the next
// AddBatch starts from InitProducerID and the committed marker. A fencing
// error is kept: this instance writes nothing more until Start.
func (s *Sink) fail(ctx context.Context, err error) error {
	cl := s.mu.cl
	s.mu.cl = nil
	if cl != nil {
		_ = cl.AbortBufferedRecords(ctx)
		_ = cl.EndTransaction(ctx, kgo.TryAbort) // best effort: InitProducerID aborts it anyway
		cl.Close()
	}
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		s.mu.fenced = fmt.Errorf("%w (transactional id %q): %w", ErrFenced, s.mu.txnID, err)
		return s.mu.fenced
	}
	return err
}

// encode turns the batch's rows into records, in row order.
func (s *Sink) encode(batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) ([]*kgo.Record, error) {
	if len(records) == 0 {
		return nil, nil
	}
	p, err := s.planFor(schema)
	if err != nil {
		return nil, err
	}
	hdr := []kgo.RecordHeader{{Key: HeaderBatch, Value: strconv.AppendInt(nil, batchID, 10)}}
	var out []*kgo.Record
	row := 0
	for _, rec := range records {
		for i := 0; i < int(rec.NumRows()); i++ {
			v, err := rowValue(p, rec, i)
			if err != nil {
				return nil, fmt.Errorf("row %d: %w", row, err)
			}
			r := &kgo.Record{Topic: s.c.topic, Value: v, Headers: hdr}
			if p.key >= 0 {
				r.Key = keyOf(rec.Column(p.key), i)
			}
			if p.ts >= 0 {
				if a := rec.Column(p.ts).(*array.Timestamp); a.IsValid(i) {
					r.Timestamp = a.Value(i).ToTime(a.DataType().(*arrow.TimestampType).Unit)
				}
			}
			out = append(out, r)
			row++
		}
	}
	return out, nil
}

// Close releases the clients. The caller that created the sink closes it
// once the query has stopped; the engine never does. An open transaction
// (there is none between calls) would be aborted by the broker at its
// timeout.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.cl != nil {
		s.mu.cl.Close()
		s.mu.cl = nil
	}
	s.admCl.Close()
	return nil
}
