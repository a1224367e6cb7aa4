package kafka

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	fetchWait      = 200 * time.Millisecond
	maxRetries     = 25 // transient broker errors in a row before giving up
	maxIdleFetches = 25 // fetches in a row that make no progress below the end
)

// Read emits the records of [start, end): partitions in topic, partition
// order, records in offset order. A partition that start does not hold
// (absent, or recorded under another topic id) is read from end's "from"
// entry for it, or from offset 0 when it has none (a version-1 end). A
// topic whose id now differs from the one end records was deleted and
// created after planning: its ranges are data loss. The range is read
// with direct fetch requests to each partition's leader, so the end is
// reached by offsets, not by counting records: transaction markers and
// aborted records inside the range are skipped by offset, and Read returns
// once the fetch position reaches end.
//
// With WithDeadLetterTopic, the dead letters of all the ranges are produced in
// one transaction after the last record is emitted and before Read returns
// (see the package documentation); an error then fails the Read, and the
// engine runs the batch again.
func (s *Source) Read(ctx context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	st, err := ParsePosition(start)
	if err != nil {
		return fmt.Errorf("kafka: read: start: %w", err)
	}
	en, err := ParsePosition(end)
	if err != nil {
		return fmt.Errorf("kafka: read: end: %w", err)
	}
	if s.c.deadTopic != "" && s.DeadLetterTransactionalID() == "" {
		return fmt.Errorf("kafka: read: %w", ErrNoTransactionalID)
	}
	w := newRowWriter(s.c.mem, &s.c, s.schema)
	defer w.release()
	var meta *leaders
	pre := s.takePrefetched(start, end)
	if pre != nil {
		meta = pre.meta
	}
	var deadRanges []deadRange
	for _, tp := range en.Offsets.list() {
		from := en.first(st, tp)
		to := en.Offsets[tp.topic][tp.partition]
		if to <= from {
			continue
		}
		if meta == nil {
			if meta, err = s.loadLeaders(ctx, en.Offsets.topics()); err != nil {
				return fmt.Errorf("kafka: read: %w", err)
			}
		}
		first, _ := pre.firstOf(tp, from)
		dead, err := s.readRange(ctx, meta, tp, en.TopicIDs[tp.topic], from, to, first, w, emit)
		if err != nil {
			return fmt.Errorf("kafka: read %s [%d, %d): %w", tp, from, to, err)
		}
		if len(dead) == 0 {
			continue
		}
		if s.c.deadDir != "" {
			if err := s.writeDeadLetters(tp, from, to, dead); err != nil {
				return fmt.Errorf("kafka: read %s [%d, %d): dead letters: %w", tp, from, to, err)
			}
			continue
		}
		deadRanges = append(deadRanges, deadRange{tp: tp, topicID: dead[0].topicID, from: from, to: to, dead: dead})
	}
	if err := w.flush(emit); err != nil {
		return fmt.Errorf("kafka: read: emit: %w", err)
	}
	if len(deadRanges) > 0 {
		if err := s.produceDeadLetters(ctx, deadRanges); err != nil {
			return fmt.Errorf("kafka: read: dead letters to %q: %w", s.c.deadTopic, err)
		}
	}
	return nil
}

// leaders caches topic ids and partition leaders from a metadata request.
type leaders struct {
	topics []string
	md     kadm.Metadata
}

func (s *Source) loadLeaders(ctx context.Context, topics []string) (*leaders, error) {
	md, err := s.adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	return &leaders{topics: topics, md: md}, nil
}

// lookup returns the leader and topic id, or ok=false if the partition is
// not in the metadata (deleted, or not yet known).
func (l *leaders) lookup(tp topicPartition) (leader int32, id [16]byte, ok bool) {
	td, found := l.md.Topics[tp.topic]
	if !found || td.Err != nil {
		return 0, id, false
	}
	pd, found := td.Partitions[tp.partition]
	if !found || pd.Leader < 0 {
		return 0, id, false
	}
	return pd.Leader, td.ID, true
}

func (s *Source) isolation() kgo.IsolationLevel {
	if s.c.readCommitted {
		return kgo.ReadCommitted()
	}
	return kgo.ReadUncommitted()
}

// fetch fetches tp from off, read_committed when committed is set.
func (s *Source) fetch(ctx context.Context, leader int32, id [16]byte, tp topicPartition, off int64, committed bool) (*kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = int32(fetchWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = s.c.fetchMaxBytes
	if committed {
		req.IsolationLevel = 1
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = tp.topic
	rt.TopicID = id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = tp.partition
	rp.FetchOffset = off
	rp.PartitionMaxBytes = s.c.fetchMaxBytes
	rp.CurrentLeaderEpoch = -1
	rp.LogStartOffset = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := s.cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if p := &resp.Topics[i].Partitions[j]; p.Partition == tp.partition {
				return p, nil
			}
		}
	}
	return nil, fmt.Errorf("fetch response without partition %d", tp.partition)
}

// readRange reads [from, to) of one partition into w and returns the
// records whose value does not decode when a dead-letter output is set.
// planned is the topic id the range was planned in (hex, "" if unknown).
//
// first, when not nil, is the answer to the fetch at from that Prefetch
// already sent; it stands for the first fetch.
func (s *Source) readRange(ctx context.Context, meta *leaders, tp topicPartition, planned string, from, to int64, first *kmsg.FetchResponseTopicPartition, w *rowWriter, emit func(arrow.RecordBatch) error) ([]deadLetter, error) {
	var (
		off           = from
		retries, idle int
		dead          []deadLetter
		lastErr       error
		refresh       = func() error {
			m, err := s.loadLeaders(ctx, meta.topics)
			if err != nil {
				return err // keep the old leaders; the next attempt refreshes again
			}
			*meta = *m
			return nil
		}
		backoff         = func() error { return sleep(ctx, time.Duration(min(retries, 10))*20*time.Millisecond) }
		retryable       = func(err error) error { lastErr = err; retries++; return nil }
		dataLossMissing = func() error {
			return s.dataLoss(&DataLossError{Topic: tp.topic, Partition: tp.partition, Expected: off, Available: -1,
				Reason: "topic or partition deleted"}, to-off)
		}
	)
	for off < to {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if retries > maxRetries {
			return nil, fmt.Errorf("offset %d: giving up after %d attempts: %w", off, retries, lastErr)
		}
		if retries > 0 {
			if err := backoff(); err != nil {
				return nil, err
			}
			if err := refresh(); err != nil {
				_ = retryable(err)
				continue
			}
		}
		leader, id, ok := meta.lookup(tp)
		if !ok {
			if td, found := meta.md.Topics[tp.topic]; found && td.Err != nil && !errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
				_ = retryable(td.Err)
				continue
			}
			if err := dataLossMissing(); err != nil {
				return nil, err
			}
			off = to
			break
		}
		if now := hex.EncodeToString(id[:]); planned != "" && id != ([16]byte{}) && now != planned {
			if err := s.dataLoss(&DataLossError{Topic: tp.topic, Partition: tp.partition, Expected: off, Available: -1,
				RecordedTopicID: planned, TopicID: now,
				Reason: "the batch's range was planned in the deleted topic; WithFailOnDataLoss(false) skips it and the next batch reads the new topic from its earliest offset"},
				to-off); err != nil {
				return nil, err
			}
			off = to
			break
		}
		rp, err := first, error(nil)
		if first == nil || off != from {
			rp, err = s.fetch(ctx, leader, id, tp, off, s.c.readCommitted)
		}
		first = nil
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			_ = retryable(err)
			continue
		}
		switch perr := kerr.ErrorForCode(rp.ErrorCode); {
		case perr == nil:
		case errors.Is(perr, kerr.OffsetOutOfRange):
			lso, err := s.earliest(ctx, []string{tp.topic})
			if err != nil {
				_ = retryable(err)
				continue
			}
			first, ok := lso.get(tp.topic, tp.partition)
			if !ok {
				if err := dataLossMissing(); err != nil {
					return nil, err
				}
				off = to
				continue
			}
			if off < first {
				if err := s.dataLoss(&DataLossError{Topic: tp.topic, Partition: tp.partition, Expected: off, Available: first,
					Reason: "records deleted by retention or DeleteRecords"}, min(first, to)-off); err != nil {
					return nil, err
				}
				off = min(first, to)
				continue
			}
			// Above the high watermark: the partition was truncated.
			if err := s.dataLoss(&DataLossError{Topic: tp.topic, Partition: tp.partition, Expected: to, Available: rp.HighWatermark,
				Reason: "the partition ends below the batch's end offset (truncated or recreated)"}, to-off); err != nil {
				return nil, err
			}
			off = to
			continue
		case errors.Is(perr, kerr.UnknownTopicOrPartition), errors.Is(perr, kerr.UnknownTopicID):
			if retries >= 3 {
				if err := dataLossMissing(); err != nil {
					return nil, err
				}
				off = to
				continue
			}
			_ = retryable(perr)
			continue
		default:
			if ke, ok := errors.AsType[*kerr.Error](perr); ok && ke.Retriable || errors.Is(perr, kerr.NotLeaderForPartition) ||
				errors.Is(perr, kerr.FencedLeaderEpoch) || errors.Is(perr, kerr.UnknownLeaderEpoch) || errors.Is(perr, kerr.InconsistentTopicID) {
				_ = retryable(perr)
				continue
			}
			return nil, fmt.Errorf("fetch offset %d: %w", off, perr)
		}
		retries = 0
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			Offset:         off,
			IsolationLevel: s.isolation(),
			Topic:          tp.topic,
			Partition:      tp.partition,
		}, rp, s.decomp, nil)
		if fp.Err != nil {
			return nil, fmt.Errorf("fetch offset %d: decode record batch: %w", off, fp.Err)
		}
		for _, r := range fp.Records {
			if r.Offset < off {
				continue
			}
			if r.Offset >= to {
				next = to
				break
			}
			if field, reason, ok := w.decode(r); !ok {
				de := &DecodeError{Topic: tp.topic, Partition: tp.partition, Offset: r.Offset, Field: field, Reason: reason}
				if s.c.deadTopic == "" && s.c.deadDir == "" {
					return nil, de
				}
				dead = append(dead, deadLetter{rec: r, err: de, topicID: id})
				continue
			}
			w.append(r)
			if w.rows >= s.c.rowsPerRecord {
				if err := w.flush(emit); err != nil {
					return nil, fmt.Errorf("emit: %w", err)
				}
			}
		}
		if next > off {
			off = next
			idle = 0
			continue
		}
		// No progress: the range is not (or no longer) available.
		stable := rp.HighWatermark
		if s.c.readCommitted {
			stable = rp.LastStableOffset
		}
		idle++
		switch {
		case idle >= maxIdleFetches && stable >= 0 && stable < to:
			if err := s.dataLoss(&DataLossError{Topic: tp.topic, Partition: tp.partition, Expected: to, Available: stable,
				Reason: "the partition's readable end stays below the batch's end offset"}, to-off); err != nil {
				return nil, err
			}
			off = to
		case idle >= 4*maxIdleFetches:
			return nil, fmt.Errorf("fetch offset %d: no progress after %d fetches (readable end %d)", off, idle, stable)
		default:
			if err := sleep(ctx, time.Duration(idle)*5*time.Millisecond); err != nil {
				return nil, err
			}
		}
	}
	return dead, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
