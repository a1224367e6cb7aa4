package kafka

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/storage"
)

// DeadLetterIDFile is the object, in the source's folder of the checkpoint,
// that keeps the dead-letter transactional id OpenCheckpoint created:
// {"v":1,"transactionalId":"onceflow-deadletter-<24 hex digits>"}.
const DeadLetterIDFile = "deadletter.json"

// deadLetterID is the content of DeadLetterIDFile.
type deadLetterID struct {
	Version         int    `json:"v"`
	TransactionalID string `json:"transactionalId"`
}

// progressMarker is the value of a dead-letter progress marker on the
// progress topic, keyed "<transactionalId>/<topic>/<partition>": the dead
// letters of every source offset below End are committed.
type progressMarker struct {
	Version         int    `json:"v"`
	TransactionalID string `json:"transactionalId"`
	Topic           string `json:"topic"`
	TopicID         string `json:"topicId"` // hex; a recreated topic has another id
	Partition       int32  `json:"partition"`
	End             int64  `json:"end"`
	Source          string `json:"source"`
}

// committedEnd is the newest committed marker of one source partition.
type committedEnd struct {
	topicID [16]byte
	end     int64
}

// deadRange is the dead letters of one partition range of a Read.
type deadRange struct {
	tp       topicPartition
	topicID  [16]byte
	from, to int64
	dead     []deadLetter
}

func markerKey(txnID string, tp topicPartition) []byte {
	return []byte(txnID + "/" + tp.topic + "/" + strconv.Itoa(int(tp.partition)))
}

// OpenCheckpoint implements the engine's SourceCheckpointer. With
// WithDeadLetterTopic and no WithDeadLetterTransactionalID it reads the
// transactional id kept in DeadLetterIDFile under store, creating it
// (put-if-absent, so one id wins) on the query's first start. It then
// starts the dead-letter producer: checks the transaction timeout against
// the brokers, creates the progress topic if missing, fences any older
// instance with the same transactional id (aborting its open transaction)
// and reads the committed progress markers. It clears ErrFenced: the
// engine calls it when the query (re)starts. Without WithDeadLetterTopic it
// does nothing.
func (s *Source) OpenCheckpoint(ctx context.Context, store storage.Store) error {
	if s.c.deadTopic == "" {
		return nil
	}
	id := s.c.deadTxnID
	if id == "" {
		var err error
		if id, err = loadOrCreateID(ctx, store); err != nil {
			return fmt.Errorf("kafka: open checkpoint: %w", err)
		}
	}
	s.dl.Lock()
	defer s.dl.Unlock()
	s.dl.id = id
	s.dl.fenced = nil    // a (re)start of the query takes over the id
	s.dl.checked = false // and checks the topics again: one may have been deleted
	if err := s.initDeadLocked(ctx); err != nil {
		return fmt.Errorf("kafka: open checkpoint: %w", err)
	}
	return nil
}

// DeadLetterTransactionalID returns the dead-letter producer's
// transactional id, empty before OpenCheckpoint when no option set it.
func (s *Source) DeadLetterTransactionalID() string {
	s.dl.Lock()
	defer s.dl.Unlock()
	return s.dl.id
}

func loadOrCreateID(ctx context.Context, store storage.Store) (string, error) {
	data, err := store.Get(ctx, DeadLetterIDFile)
	if storage.IsNotExist(err) {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("new transactional id: %w", err)
		}
		data, _ = json.Marshal(deadLetterID{Version: 1, TransactionalID: "onceflow-deadletter-" + hex.EncodeToString(b[:])})
		err = store.PutIfAbsent(ctx, DeadLetterIDFile, data)
		if errors.Is(err, storage.ErrExist) { // another opener won, or our own retried write
			data, err = store.Get(ctx, DeadLetterIDFile)
		}
	}
	if err != nil {
		return "", fmt.Errorf("%s/%s: %w", store.URL(), DeadLetterIDFile, err)
	}
	var f deadLetterID
	if err := json.Unmarshal(data, &f); err != nil || f.Version != 1 || f.TransactionalID == "" {
		return "", fmt.Errorf("%s/%s is not a version 1 dead-letter id: %q", store.URL(), DeadLetterIDFile, truncate(data))
	}
	return f.TransactionalID, nil
}

// initDeadLocked (re)creates the transactional producer, runs
// InitProducerID, which completes any transaction of this id still open,
// and reads the committed markers. Called with s.dl locked.
func (s *Source) initDeadLocked(ctx context.Context) error {
	if s.dl.fenced != nil {
		return s.dl.fenced
	}
	if s.dl.id == "" {
		return ErrNoTransactionalID
	}
	if s.dl.cl != nil {
		s.dl.cl.Close()
		s.dl.cl = nil
	}
	if !s.dl.checked {
		if err := s.checkDeadTopics(ctx); err != nil {
			return err
		}
		s.dl.checked = true
	}
	cl, err := kgo.NewClient(s.c.clientOpts(
		kgo.TransactionalID(s.dl.id),
		kgo.TransactionTimeout(s.c.deadTimeout),
		kgo.RecordPartitioner(markerPartitioner{progress: s.c.progressTopic(), def: kgo.UniformBytesPartitioner(64<<10, true, true, nil)}),
	)...)
	if err != nil {
		return fmt.Errorf("dead-letter transactional client: %w", err)
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return fmt.Errorf("init producer id for %q: %w", s.dl.id, err)
	}
	committed, err := s.readMarkers(ctx, s.dl.id)
	if err != nil {
		cl.Close()
		return fmt.Errorf("read dead-letter progress of %q: %w", s.dl.id, err)
	}
	s.dl.cl, s.dl.committed = cl, committed
	return nil
}

// markerPartitioner sends every progress marker to partition 0 of the
// progress topic, so the markers of one key stay in one log, in commit
// order, even when partitions are added to a topic the operators created
// with several; dead letters keep kgo's default partitioning.
type markerPartitioner struct {
	progress string
	def      kgo.Partitioner
}

func (p markerPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if topic == p.progress {
		return firstPartition{}
	}
	return p.def.ForTopic(topic)
}

type firstPartition struct{}

func (firstPartition) RequiresConsistency(*kgo.Record) bool { return true }
func (firstPartition) Partition(*kgo.Record, int) int       { return 0 }

// checkDeadTopics checks the transaction timeout against every broker's
// transaction.max.timeout.ms and the dead-letter topic's existence, and
// creates the compacted progress topic if missing.
func (s *Source) checkDeadTopics(ctx context.Context) error {
	brokers, err := s.adm.ListBrokers(ctx)
	if err != nil {
		return fmt.Errorf("list brokers: %w", err)
	}
	// A user without DescribeConfigs on the cluster (least privilege) is
	// not refused: InitProducerID enforces the maximum anyway.
	rcs, err := s.adm.DescribeBrokerConfigs(ctx, brokers.NodeIDs()...)
	if errors.Is(err, kerr.ClusterAuthorizationFailed) {
		rcs, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("describe broker configs: %w", err)
	}
	want := s.c.deadTimeout.Milliseconds()
	for _, rc := range rcs {
		if errors.Is(rc.Err, kerr.ClusterAuthorizationFailed) {
			continue
		}
		if rc.Err != nil {
			return fmt.Errorf("describe broker %s configs: %w", rc.Name, rc.Err)
		}
		for _, cfg := range rc.Configs {
			if cfg.Key != "transaction.max.timeout.ms" || cfg.Value == nil {
				continue
			}
			maxMs, err := strconv.ParseInt(*cfg.Value, 10, 64)
			if err != nil {
				return fmt.Errorf("broker %s transaction.max.timeout.ms %q: %w", rc.Name, *cfg.Value, err)
			}
			if want > maxMs {
				return fmt.Errorf("%w: WithDeadLetterTransactionTimeout is %d ms, broker %s has transaction.max.timeout.ms=%d; lower the timeout or raise the broker's maximum",
					ErrConfig, want, rc.Name, maxMs)
			}
		}
	}
	// A broker that does not report the maximum still refuses a larger
	// timeout in InitProducerID.
	progress := s.c.progressTopic()
	tds, err := s.adm.ListTopics(ctx, s.c.deadTopic, progress)
	if err != nil {
		return fmt.Errorf("describe dead-letter topic %q: %w", s.c.deadTopic, err)
	}
	if td, ok := tds[s.c.deadTopic]; !ok || td.Err != nil {
		return fmt.Errorf("dead-letter topic %q does not exist", s.c.deadTopic)
	}
	// Create the progress topic only when it is missing: a user allowed to
	// write an existing one may lack the right to create topics, and the
	// brokers refuse that before they look for the topic.
	if td, ok := tds[progress]; ok && td.Err == nil {
		return nil
	}
	// Kafka never compacts the active segment: rolling it hourly (the
	// default is a week or 1 GiB) keeps what a start reads to about an
	// hour of markers plus the newest of each key.
	compact, roll := "compact", "3600000"
	resp, err := s.adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": &compact, "segment.ms": &roll}, progress)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create dead-letter progress topic %q: %w", progress, err)
	}
	return nil
}

// readMarkers returns the newest committed marker of txnID per source
// partition. It reads partition 0 of the progress topic (the only one
// markers go to) up to the end seen first, read_uncommitted with the
// transaction control records, and keeps a marker of txnID only when its
// transaction's commit record follows it. It never waits for the last stable offset: the caller's
// InitProducerID has completed every transaction of txnID, so their
// control records lie below that end, and an open transaction of another
// query sharing the topic (a process that died inside it holds the last
// stable offset until its own timeout) is not ours to wait for.
func (s *Source) readMarkers(ctx context.Context, txnID string) (map[topicPartition]committedEnd, error) {
	topic := s.c.progressTopic()
	const poll = 50 * time.Millisecond
	var hwm kadm.ListedOffsets
	for tries := 0; ; tries++ {
		var err error
		hwm, err = s.adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = hwm.Error()
		}
		if err == nil {
			break
		}
		// A topic created a moment ago may have no leader yet.
		if tries >= 100 || !(kerr.IsRetriable(err) || errors.Is(err, kerr.UnknownTopicOrPartition)) {
			return nil, fmt.Errorf("list end offsets of %q: %w", topic, err)
		}
		if err := sleep(ctx, poll); err != nil {
			return nil, err
		}
	}
	meta, err := s.loadLeaders(ctx, []string{topic})
	if err != nil {
		return nil, err
	}
	out := map[topicPartition]committedEnd{}
	prefix := []byte(txnID + "/")
	// Markers go to partition 0 only (markerPartitioner).
	if o, ok := hwm.Lookup(topic, 0); ok && o.Offset > 0 {
		pending := map[int64][]progressMarker{} // by producer id, until its control record
		err := s.scan(ctx, meta, topicPartition{topic, o.Partition}, o.Offset, func(r *kgo.Record) error {
			if r.Attrs.IsControl() {
				ms := pending[r.ProducerID]
				delete(pending, r.ProducerID)
				// The key of a control record: version int16, type int16 (0 abort, 1 commit).
				if len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:4]) == 1 {
					for _, m := range ms {
						out[topicPartition{m.Topic, m.Partition}] = markerEnd(m) // newest wins, as under compaction
					}
				}
				return nil
			}
			if !bytes.HasPrefix(r.Key, prefix) {
				return nil
			}
			var m progressMarker
			if err := json.Unmarshal(r.Value, &m); err != nil || m.Version != 1 {
				return fmt.Errorf("progress topic %q partition %d offset %d: not a version 1 dead-letter marker: %q", topic, r.Partition, r.Offset, truncate(r.Value))
			}
			if m.TransactionalID != txnID {
				return nil // another id that starts with ours and a slash
			}
			if r.Attrs.IsTransactional() {
				pending[r.ProducerID] = append(pending[r.ProducerID], m)
			} else {
				out[topicPartition{m.Topic, m.Partition}] = markerEnd(m)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		// What is still pending was aborted: InitProducerID has completed
		// every transaction of txnID.
	}
	return out, nil
}

func markerEnd(m progressMarker) committedEnd {
	var id [16]byte
	if b, err := hex.DecodeString(m.TopicID); err == nil && len(b) == len(id) {
		copy(id[:], b)
	}
	return committedEnd{topicID: id, end: m.End}
}

// scan reads [0, end) of one partition with read_uncommitted fetches,
// control records included, ending by offset, retrying transient errors
// after a metadata refresh.
func (s *Source) scan(ctx context.Context, meta *leaders, tp topicPartition, end int64, fn func(*kgo.Record) error) error {
	off := int64(0)
	retries, idle := 0, 0
	var lastErr error
	for off < end {
		if retries > 0 {
			if retries > maxRetries {
				return fmt.Errorf("fetch %s at %d: giving up after %d attempts: %w", tp, off, retries, lastErr)
			}
			if err := sleep(ctx, time.Duration(min(retries, 10))*20*time.Millisecond); err != nil {
				return err
			}
			m, err := s.loadLeaders(ctx, meta.topics)
			if err != nil {
				lastErr = err
				retries++
				continue
			}
			*meta = *m
		}
		leader, id, ok := meta.lookup(tp)
		if !ok {
			lastErr = errors.New("no leader in the metadata")
			retries++
			continue
		}
		rp, err := s.fetch(ctx, leader, id, tp, off, false)
		if err == nil {
			err = kerr.ErrorForCode(rp.ErrorCode)
		}
		switch {
		case err == nil:
		case errors.Is(err, kerr.OffsetOutOfRange) && rp != nil && rp.LogStartOffset > off:
			off = rp.LogStartOffset // compacted or deleted below: superseded markers
			continue
		default:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if ke, ok := errors.AsType[*kerr.Error](err); ok && !ke.Retriable && !errors.Is(err, kerr.NotLeaderForPartition) {
				return fmt.Errorf("fetch %s at %d: %w", tp, off, err)
			}
			lastErr = err
			retries++
			continue
		}
		retries = 0
		if rp.LogStartOffset > off {
			off = rp.LogStartOffset
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			Offset: off, IsolationLevel: kgo.ReadUncommitted(), KeepControlRecords: true, Topic: tp.topic, Partition: tp.partition,
		}, rp, s.decomp, nil)
		if fp.Err != nil {
			return fmt.Errorf("fetch %s at %d: %w", tp, off, fp.Err)
		}
		for _, r := range fp.Records {
			if r.Offset >= end {
				break
			}
			if r.Offset < off {
				continue
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		if next > off {
			off, idle = next, 0
			continue
		}
		if idle++; idle > maxIdleFetches {
			return fmt.Errorf("fetch %s: no progress at offset %d below %d", tp, off, end)
		}
		if err := sleep(ctx, time.Duration(idle)*5*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// produceDeadLetters sends the dead letters of one Read to the dead-letter
// topic in one transaction, with a progress marker per source partition
// (end: the range's end). Dead letters below a partition's committed marker
// are skipped: they were committed by an earlier run of the batch.
//
// A transaction that fails before its commit is sent (and not by fencing)
// is tried once more with a fresh producer: InitProducerID, the markers
// read again, the dead letters chosen again. The brokers forget a
// transactional id idle for transactional.id.expiration.ms (a week by
// default), so the first transaction after a quiet week fails that way.
func (s *Source) produceDeadLetters(ctx context.Context, ranges []deadRange) error {
	s.dl.Lock()
	defer s.dl.Unlock()
	for attempt := 0; ; attempt++ {
		if s.dl.fenced != nil {
			return s.dl.fenced
		}
		if s.dl.cl == nil {
			if err := s.initDeadLocked(ctx); err != nil {
				return err
			}
		}
		recs, sent, ends, skipped := s.planDeadLocked(ranges)
		if len(recs) > 0 {
			committing, err := s.transactLocked(ctx, recs)
			if err != nil {
				err = s.failLocked(ctx, err)
				if attempt == 0 && !committing && s.dl.fenced == nil && ctx.Err() == nil {
					s.c.logger.Info("kafka: dead-letter transaction failed before its commit; trying once more with a new producer",
						"transactionalId", s.dl.id, "error", err.Error())
					continue
				}
				return err
			}
			for tp, ce := range ends {
				s.dl.committed[tp] = ce
			}
			fault.Point(fault.KafkaDeadLetterAfterCommit)
		}
		for _, d := range sent {
			s.c.logger.Warn("kafka: value sent to dead letter", "topic", d.rec.Topic, "partition", d.rec.Partition,
				"offset", d.rec.Offset, "error", d.err.Error())
		}
		if skipped > 0 {
			s.c.logger.Info("kafka: dead letters already committed by an earlier run of the batch; skipping",
				"count", skipped, "transactionalId", s.dl.id)
		}
		s.mu.Lock()
		s.mu.dead += int64(len(sent))
		s.mu.deadSkipped += skipped
		s.mu.Unlock()
		return nil
	}
}

// planDeadLocked returns the records of the dead-letter transaction (the
// dead letters at or above each partition's committed marker, then one
// marker per partition that has any), the dead letters they carry, the
// markers' ends and the number of dead letters skipped.
func (s *Source) planDeadLocked(ranges []deadRange) (recs []*kgo.Record, sent []deadLetter, ends map[topicPartition]committedEnd, skipped int64) {
	var markers []*kgo.Record
	ends = map[topicPartition]committedEnd{}
	for _, r := range ranges {
		first := r.from
		if ce, ok := s.dl.committed[r.tp]; ok && ce.topicID == r.topicID {
			first = max(first, ce.end)
		}
		n := 0
		for _, d := range r.dead {
			if d.rec.Offset < first {
				skipped++
				continue
			}
			recs = append(recs, s.deadRecord(d))
			sent = append(sent, d)
			n++
		}
		if n == 0 {
			continue
		}
		mv, _ := json.Marshal(progressMarker{Version: 1, TransactionalID: s.dl.id, Topic: r.tp.topic,
			TopicID: hex.EncodeToString(r.topicID[:]), Partition: r.tp.partition, End: r.to, Source: s.Description()})
		markers = append(markers, &kgo.Record{Topic: s.c.progressTopic(), Key: markerKey(s.dl.id, r.tp), Value: mv})
		ends[r.tp] = committedEnd{topicID: r.topicID, end: r.to}
	}
	return append(recs, markers...), sent, ends, skipped
}

// transactLocked produces recs in one transaction and commits it.
// committing reports whether the commit was sent (its outcome may then be
// unknown).
func (s *Source) transactLocked(ctx context.Context, recs []*kgo.Record) (committing bool, err error) {
	cl := s.dl.cl
	if err := cl.BeginTransaction(); err != nil {
		return false, fmt.Errorf("begin transaction: %w", err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return false, fmt.Errorf("produce: %w", err)
	}
	fault.Point(fault.KafkaDeadLetterAfterProduce)
	if s.dl.beforeCommit != nil {
		s.dl.beforeCommit()
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return true, fmt.Errorf("commit: %w", err)
	}
	return true, nil
}

// failLocked aborts what can be aborted and drops the producer, so the
// next Read starts from InitProducerID and the committed markers (a commit
// whose outcome was unknown is then neither lost nor repeated). A fencing
// error is kept: this instance produces no more dead letters.
func (s *Source) failLocked(ctx context.Context, err error) error {
	if cl := s.dl.cl; cl != nil {
		s.dl.cl = nil
		_ = cl.AbortBufferedRecords(ctx)
		_ = cl.EndTransaction(ctx, kgo.TryAbort) // best effort: InitProducerID aborts it anyway
		cl.Close()
	}
	if errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		s.dl.fenced = fmt.Errorf("%w (transactional id %q): %w", ErrFenced, s.dl.id, err)
		return s.dl.fenced
	}
	return err
}

// closeDead releases the transactional producer. An open transaction
// (there is none between calls) would be aborted by the broker at its
// timeout, or by the next instance's InitProducerID.
func (s *Source) closeDead() {
	s.dl.Lock()
	defer s.dl.Unlock()
	if s.dl.cl != nil {
		s.dl.cl.Close()
		s.dl.cl = nil
	}
}
