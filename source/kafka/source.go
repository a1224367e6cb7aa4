package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Source reads Kafka partitions by offset range. See the package
// documentation.
type Source struct {
	c      config
	schema *arrow.Schema
	cl     *kgo.Client
	adm    *kadm.Client
	decomp kgo.Decompressor

	mu struct {
		sync.Mutex
		availNow    Offsets // set by PrepareAvailableNow
		parts       map[topicPartition]PartitionStats
		gaps        int64
		skipped     int64
		dead        int64
		deadSkipped int64
	}

	// dl is the transactional dead-letter producer (WithDeadLetterTopic);
	// held for a whole dead-letter transaction.
	dl struct {
		sync.Mutex
		id        string
		cl        *kgo.Client // nil until initialised, and after a failure
		checked   bool        // timeout, topics checked and progress topic created
		committed map[topicPartition]committedEnd
		fenced    error
		// beforeCommit, when set (tests only), runs between produce and
		// commit.
		beforeCommit func()
	}
}

// PartitionStats is the planning view of one partition: the last planned
// batch covers [Start, End), Latest is the newest available offset seen
// then, Lag = Latest − End.
type PartitionStats struct {
	Topic     string
	Partition int32
	Start     int64
	End       int64
	Latest    int64
	Lag       int64
}

// Stats is a snapshot of the source's progress and counters.
type Stats struct {
	Partitions []PartitionStats // in topic, partition order
	// DataLossGaps counts gaps skipped under WithFailOnDataLoss(false).
	DataLossGaps int64
	// SkippedOffsets counts offsets inside those gaps, where known.
	SkippedOffsets int64
	// DeadLetters counts values sent to the dead-letter output.
	DeadLetters int64
	// DeadLettersSkipped counts dead letters not produced again because
	// an earlier run of their batch had committed them (WithDeadLetterTopic).
	DeadLettersSkipped int64
}

// New validates the options and creates the client. It does not contact
// the brokers; the first call that needs them does.
func New(opts ...Option) (*Source, error) {
	c := defaults()
	for _, o := range opts {
		o(&c)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return nil, fmt.Errorf("kafka: client: %w", err)
	}
	s := &Source{
		c:      c,
		schema: buildSchema(&c),
		cl:     cl,
		adm:    kadm.NewClient(cl),
		decomp: kgo.DefaultDecompressor(),
	}
	s.mu.parts = map[topicPartition]PartitionStats{}
	s.dl.id = c.deadTxnID
	return s, nil
}

// clientOpts are the client options of both clients: brokers, WithTLS, WithSASL,
// extra (the dead-letter producer's transactional options), then the
// user's WithClientOpts.
func (c *config) clientOpts(extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.brokers...),
		// Planning must see partitions and topics created a moment ago;
		// kadm answers from metadata cached up to this age.
		kgo.MetadataMinAge(10 * time.Millisecond),
	}
	if c.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(c.tls))
	}
	if c.sasl != nil {
		opts = append(opts, kgo.SASL(c.sasl))
	}
	opts = append(opts, extra...)
	return append(opts, c.extra...)
}

// Close releases the clients.
func (s *Source) Close() error {
	s.closeDead()
	s.cl.Close()
	return nil
}

// Schema is key, the value column(s), topic, partition, offset, timestamp,
// headers (see the package documentation).
func (s *Source) Schema() *arrow.Schema { return s.schema }

// Description is "kafka[t1,t2]" or "kafka[/pattern/]".
func (s *Source) Description() string {
	if s.c.pattern != nil {
		return "kafka[/" + s.c.pattern.String() + "/]"
	}
	ts := append([]string(nil), s.c.topics...)
	sort.Strings(ts)
	return "kafka[" + strings.Join(ts, ",") + "]"
}

// subscribed reports whether topic is one the source reads. A pattern
// never takes the source's own dead-letter and progress topics: it would
// read back its dead letters (sending them again, batch after batch) and
// its markers.
func (s *Source) subscribed(topic string) bool {
	if s.c.pattern != nil {
		if s.c.deadTopic != "" && (topic == s.c.deadTopic || topic == s.c.progressTopic()) {
			return false
		}
		return s.c.pattern.MatchString(topic)
	}
	for _, t := range s.c.topics {
		if t == topic {
			return true
		}
	}
	return false
}

// resolveTopics returns the existing topics the source reads, sorted.
func (s *Source) resolveTopics(ctx context.Context) ([]string, error) {
	var names []string
	if s.c.pattern != nil {
		tds, err := s.adm.ListTopics(ctx)
		if err != nil {
			return nil, fmt.Errorf("list topics: %w", err)
		}
		for _, t := range tds.Names() {
			if s.subscribed(t) {
				names = append(names, t)
			}
		}
		return names, nil
	}
	seen := map[string]bool{}
	for _, t := range s.c.topics {
		if !seen[t] {
			seen[t] = true
			names = append(names, t)
		}
	}
	sort.Strings(names)
	return names, nil
}

// listed turns kadm's listed offsets into Offsets, leaving out topics that
// do not exist.
func listed(l kadm.ListedOffsets, err error) (Offsets, error) {
	if err != nil {
		return nil, err
	}
	o := Offsets{}
	var errs []error
	l.Each(func(lo kadm.ListedOffset) {
		switch {
		case lo.Err == nil:
			o.set(lo.Topic, lo.Partition, lo.Offset)
		case errors.Is(lo.Err, kerr.UnknownTopicOrPartition), errors.Is(lo.Err, kerr.UnknownTopicID):
		default:
			errs = append(errs, fmt.Errorf("topic %q partition %d: %w", lo.Topic, lo.Partition, lo.Err))
		}
	})
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return o, nil
}

// latest returns each partition's end: the last stable offset under
// read_committed, the high watermark otherwise.
func (s *Source) latest(ctx context.Context, topics []string) (Offsets, error) {
	if len(topics) == 0 {
		return Offsets{}, nil // kadm lists every topic when given none
	}
	if s.c.readCommitted {
		return listed(s.adm.ListCommittedOffsets(ctx, topics...))
	}
	return listed(s.adm.ListEndOffsets(ctx, topics...))
}

func (s *Source) earliest(ctx context.Context, topics []string) (Offsets, error) {
	if len(topics) == 0 {
		return Offsets{}, nil
	}
	return listed(s.adm.ListStartOffsets(ctx, topics...))
}

// InitialOffset resolves the starting position against the cluster.
func (s *Source) InitialOffset(ctx context.Context) (json.RawMessage, error) {
	topics, err := s.resolveTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka: initial offset: %w", err)
	}
	first, err := s.earliest(ctx, topics)
	if err != nil {
		return nil, fmt.Errorf("kafka: initial offset: list start offsets: %w", err)
	}
	if s.c.pattern == nil {
		for _, t := range topics {
			if len(first[t]) == 0 {
				return nil, fmt.Errorf("kafka: initial offset: topic %q does not exist", t)
			}
		}
	}
	last, err := s.latest(ctx, topics)
	if err != nil {
		return nil, fmt.Errorf("kafka: initial offset: list end offsets: %w", err)
	}
	out := Offsets{}
	switch s.c.start.kind {
	case startEarliest:
		out = first
	case startLatest:
		out = last
	case startTimestamp:
		at, err := listed(s.adm.ListOffsetsAfterMilli(ctx, s.c.start.at.UnixMilli(), topics...))
		if err != nil {
			return nil, fmt.Errorf("kafka: initial offset: list offsets at %s: %w", s.c.start.at.UTC().Format("2006-01-02T15:04:05.000Z07:00"), err)
		}
		for _, tp := range last.list() {
			end := last[tp.topic][tp.partition]
			off, ok := at.get(tp.topic, tp.partition)
			if !ok || off < 0 || off > end {
				off = end // no record at or after t yet (or only in an open transaction)
			}
			out.set(tp.topic, tp.partition, off)
		}
	case startSpecific:
		spec, _ := parseOffsets(s.c.start.specific, true) // validated in New
		for _, t := range spec.topics() {
			if !s.subscribed(t) {
				return nil, fmt.Errorf("kafka: initial offset: starting offsets name topic %q, which the source does not read", t)
			}
			for _, p := range spec.partitions(t) {
				if _, ok := first.get(t, p); !ok {
					return nil, fmt.Errorf("kafka: initial offset: starting offsets name topic %q partition %d, which does not exist", t, p)
				}
			}
		}
		for _, tp := range first.list() {
			off, ok := spec.get(tp.topic, tp.partition)
			switch {
			case !ok || off == -2:
				off = first[tp.topic][tp.partition]
			case off == -1:
				off = last[tp.topic][tp.partition]
			}
			out.set(tp.topic, tp.partition, off)
		}
	}
	return out.encode(), nil
}

// PrepareAvailableNow fixes the end of the AvailableNow run: later
// LatestOffset calls never go beyond the positions available now.
func (s *Source) PrepareAvailableNow(ctx context.Context) error {
	topics, err := s.resolveTopics(ctx)
	if err != nil {
		return fmt.Errorf("kafka: prepare available now: %w", err)
	}
	last, err := s.latest(ctx, topics)
	if err != nil {
		return fmt.Errorf("kafka: prepare available now: %w", err)
	}
	s.mu.Lock()
	s.mu.availNow = last
	s.mu.Unlock()
	return nil
}

// LatestOffset plans the end of the batch that starts at start. Partitions
// of start keep their position when nothing is new; partitions and topics
// new since start that hold records are added, read from offset 0.
func (s *Source) LatestOffset(ctx context.Context, start json.RawMessage) (json.RawMessage, error) {
	st, err := ParseOffsets(start)
	if err != nil {
		return nil, fmt.Errorf("kafka: latest offset: start: %w", err)
	}
	topics, err := s.resolveTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka: latest offset: %w", err)
	}
	last, err := s.latest(ctx, topics)
	if err != nil {
		return nil, fmt.Errorf("kafka: latest offset: %w", err)
	}
	if last, err = s.confirmMissing(ctx, st, topics, last); err != nil {
		return nil, fmt.Errorf("kafka: latest offset: %w", err)
	}
	s.mu.Lock()
	avail := s.mu.availNow
	s.mu.Unlock()

	end := Offsets{}
	var cands []topicPartition
	var froms, caps, lags []int64
	// Partitions of start.
	for _, tp := range st.list() {
		from := st[tp.topic][tp.partition]
		if !s.subscribed(tp.topic) {
			s.c.logger.Info("kafka: topic no longer subscribed; dropping it from the offsets", "topic", tp.topic, "partition", tp.partition)
			continue
		}
		l, ok := last.get(tp.topic, tp.partition)
		if !ok {
			if err := s.dataLoss(&DataLossError{Topic: tp.topic, Partition: tp.partition, Expected: from, Available: -1,
				Reason: "topic or partition deleted"}, 0); err != nil {
				return nil, err
			}
			continue
		}
		if l < from {
			if err := s.dataLoss(&DataLossError{Topic: tp.topic, Partition: tp.partition, Expected: from, Available: l,
				Reason: "the partition now ends below the recorded offset (recreated or truncated); continuing from its end"}, 0); err != nil {
				return nil, err
			}
			end.set(tp.topic, tp.partition, l)
			s.setStats(tp, from, l, l)
			continue
		}
		end.set(tp.topic, tp.partition, from)
		cands = append(cands, tp)
		froms = append(froms, from)
		caps = append(caps, l)
	}
	// Partitions new since start.
	for _, tp := range last.list() {
		if _, ok := st.get(tp.topic, tp.partition); ok {
			continue
		}
		cands = append(cands, tp)
		froms = append(froms, 0)
		caps = append(caps, last[tp.topic][tp.partition])
	}
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool {
		x, y := cands[order[a]], cands[order[b]]
		if x.topic != y.topic {
			return x.topic < y.topic
		}
		return x.partition < y.partition
	})
	for _, i := range order {
		l := caps[i]
		if avail != nil {
			a, ok := avail.get(cands[i].topic, cands[i].partition)
			if !ok {
				a = froms[i]
			}
			l = min(l, max(a, froms[i]))
		}
		lags = append(lags, l-froms[i])
	}
	take := spread(s.c.maxPerTrigger, lags)
	for k, i := range order {
		tp := cands[i]
		e := froms[i] + take[k]
		if _, inStart := st.get(tp.topic, tp.partition); inStart || e > froms[i] {
			end.set(tp.topic, tp.partition, e)
		}
		s.setStats(tp, froms[i], e, caps[i])
	}
	return end.encode(), nil
}

// confirmMissing asks again, a few times, for partitions of start that
// the listing lacks, so a metadata hiccup is never taken for a deleted
// partition (which WithFailOnDataLoss(false) would drop, and later re-read from
// offset 0).
func (s *Source) confirmMissing(ctx context.Context, st Offsets, topics []string, last Offsets) (Offsets, error) {
	seen := map[string]bool{}
	for _, t := range topics {
		seen[t] = true
	}
	for _, t := range st.topics() { // a topic of start missing from a pattern's listing
		if !seen[t] && s.subscribed(t) {
			topics = append(topics, t)
		}
	}
	for try := 0; try < 3; try++ {
		missing := false
		for _, tp := range st.list() {
			if _, ok := last.get(tp.topic, tp.partition); !ok && s.subscribed(tp.topic) {
				missing = true
				break
			}
		}
		if !missing {
			return last, nil
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
		again, err := s.latest(ctx, topics)
		if err != nil {
			return nil, err
		}
		last = again
	}
	return last, nil
}

// dataLoss fails with e under WithFailOnDataLoss, or logs and counts it.
func (s *Source) dataLoss(e *DataLossError, skipped int64) error {
	if s.c.failOnDataLoss {
		return e
	}
	s.c.logger.Warn("kafka: skipping lost data", "topic", e.Topic, "partition", e.Partition,
		"expected", e.Expected, "available", e.Available, "reason", e.Reason)
	s.mu.Lock()
	s.mu.gaps++
	s.mu.skipped += skipped
	s.mu.Unlock()
	return nil
}

func (s *Source) setStats(tp topicPartition, start, end, latest int64) {
	s.mu.Lock()
	s.mu.parts[tp] = PartitionStats{Topic: tp.topic, Partition: tp.partition, Start: start, End: end, Latest: latest, Lag: latest - end}
	s.mu.Unlock()
}

// Stats returns per-partition progress of the last planning and the
// counters of skipped gaps and dead letters.
func (s *Source) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{DataLossGaps: s.mu.gaps, SkippedOffsets: s.mu.skipped, DeadLetters: s.mu.dead, DeadLettersSkipped: s.mu.deadSkipped}
	for _, p := range s.mu.parts {
		st.Partitions = append(st.Partitions, p)
	}
	sort.Slice(st.Partitions, func(i, j int) bool {
		a, b := st.Partitions[i], st.Partitions[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return st
}
