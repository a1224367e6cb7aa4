package kafka

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/onceflow/onceflow/contract"
)

var (
	_ contract.Source             = (*Source)(nil)
	_ contract.SourceCheckpointer = (*Source)(nil)
	_ contract.AvailableNowSource = (*Source)(nil)
	_ contract.SourceIdentifier   = (*Source)(nil)
	_ contract.SourceMetrics      = (*Source)(nil)
	_ contract.Describer          = (*Source)(nil)
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
		availNow    *Position // set by PrepareAvailableNow
		parts       map[topicPartition]PartitionStats
		gaps        int64
		skipped     int64
		recreated   int64
		dead        int64
		deadSkipped int64
	}

	// pre holds what Prefetch fetched for the next Read.
	pre struct {
		sync.Mutex
		p *prefetched
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
	// TopicsRecreated counts topics found deleted and created again (their
	// id differs from the recorded one) and read again from their earliest
	// offset under WithFailOnDataLoss(false).
	TopicsRecreated int64
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

// Description is "kafka[t1,t2]" or "kafka[/pattern/]", followed, under
// WithPartitions, by the partitions: "kafka[t1;partitions=0,3]".
func (s *Source) Description() string {
	var parts string
	if s.c.partitionsSet {
		ps := slices.Clone(s.c.partitions)
		slices.Sort(ps)
		ps = slices.Compact(ps)
		strs := make([]string, len(ps))
		for i, p := range ps {
			strs[i] = strconv.Itoa(int(p))
		}
		parts = ";partitions=" + strings.Join(strs, ",")
	}
	if s.c.pattern != nil {
		return "kafka[/" + s.c.pattern.String() + "/" + parts + "]"
	}
	ts := append([]string(nil), s.c.topics...)
	sort.Strings(ts)
	return "kafka[" + strings.Join(ts, ",") + parts + "]"
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
	var o Offsets
	var err error
	if s.c.readCommitted {
		o, err = listed(s.adm.ListCommittedOffsets(ctx, topics...))
	} else {
		o, err = listed(s.adm.ListEndOffsets(ctx, topics...))
	}
	return s.c.only(o), err
}

func (s *Source) earliest(ctx context.Context, topics []string) (Offsets, error) {
	if len(topics) == 0 {
		return Offsets{}, nil
	}
	o, err := listed(s.adm.ListStartOffsets(ctx, topics...))
	return s.c.only(o), err
}

// topicIDs returns the current id, in hex, of each of topics that exists;
// a topic that does not, or brokers without topic ids, give none.
func (s *Source) topicIDs(ctx context.Context, topics []string) (map[string]string, error) {
	ids := map[string]string{}
	if len(topics) == 0 {
		return ids, nil // kadm describes every topic when given none
	}
	// A request of our own, not kadm's Metadata: that answers from the
	// client's cache, and listIDs needs two fresh looks.
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	for _, rt := range resp.Topics {
		if rt.Topic != nil && rt.TopicID != ([16]byte{}) {
			ids[*rt.Topic] = hex.EncodeToString(rt.TopicID[:])
		}
	}
	return ids, nil
}

// listIDs runs list between two lookups of the topics' ids and returns
// them. Offsets are listed by topic name, so only equal ids before and
// after show that what list saw belongs to those ids (a deleted topic's id
// never comes back); when they differ, a topic was deleted or created
// meanwhile and list runs again. list gets the ids looked up before it.
func (s *Source) listIDs(ctx context.Context, topics []string, list func(ids map[string]string) error) (map[string]string, error) {
	for try := 1; ; try++ {
		before, err := s.topicIDs(ctx, topics)
		if err != nil {
			return nil, err
		}
		if err := list(before); err != nil {
			return nil, err
		}
		after, err := s.topicIDs(ctx, topics)
		if err != nil {
			return nil, err
		}
		if maps.Equal(before, after) {
			return after, nil
		}
		if try == 3 {
			return nil, fmt.Errorf("topic ids changed during each of %d listings (topics being deleted and created): before %v, after %v", try, before, after)
		}
	}
}

// InitialOffset resolves the starting position against the cluster.
func (s *Source) InitialOffset(ctx context.Context) (json.RawMessage, error) {
	topics, err := s.resolveTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka: initial offset: %w", err)
	}
	var first, last, at Offsets
	ids, err := s.listIDs(ctx, topics, func(map[string]string) error {
		var err error
		if first, err = s.earliest(ctx, topics); err != nil {
			return fmt.Errorf("list start offsets: %w", err)
		}
		if last, err = s.latest(ctx, topics); err != nil {
			return fmt.Errorf("list end offsets: %w", err)
		}
		if s.c.start.kind == startTimestamp {
			if at, err = listed(s.adm.ListOffsetsAfterMilli(ctx, s.c.start.at.UnixMilli(), topics...)); err == nil {
				at = s.c.only(at)
			} else {
				return fmt.Errorf("list offsets at %s: %w", s.c.start.at.UTC().Format("2006-01-02T15:04:05.000Z07:00"), err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kafka: initial offset: %w", err)
	}
	if s.c.pattern == nil {
		for _, t := range topics {
			if len(first[t]) == 0 && !s.c.partitionsSet {
				return nil, fmt.Errorf("kafka: initial offset: topic %q does not exist", t)
			}
			for _, p := range s.c.partitions {
				if _, ok := first.get(t, p); !ok {
					return nil, fmt.Errorf("kafka: initial offset: topic %q has no partition %d (WithPartitions)", t, p)
				}
			}
		}
	}
	out := Offsets{}
	switch s.c.start.kind {
	case startEarliest:
		out = first
	case startLatest:
		out = last
	case startTimestamp:
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
	return Position{Offsets: out, TopicIDs: ids}.encode(), nil
}

// PrepareAvailableNow fixes the end of the AvailableNow run: later
// LatestOffset calls never go beyond the positions available now.
func (s *Source) PrepareAvailableNow(ctx context.Context) error {
	topics, err := s.resolveTopics(ctx)
	if err != nil {
		return fmt.Errorf("kafka: prepare available now: %w", err)
	}
	var last Offsets
	ids, err := s.listIDs(ctx, topics, func(map[string]string) error {
		var err error
		last, err = s.latest(ctx, topics)
		return err
	})
	if err != nil {
		return fmt.Errorf("kafka: prepare available now: %w", err)
	}
	s.mu.Lock()
	s.mu.availNow = &Position{Offsets: last, TopicIDs: ids}
	s.mu.Unlock()
	return nil
}

// LatestOffset plans the end of the batch that starts at start. Partitions
// of start keep their position when nothing is new; partitions and topics
// new since start that hold records are added, starting at their log start
// offset, which the end records as their "from" (see Position), so every
// run of the batch reads the same range. A topic of start whose id changed
// (deleted and created again) is data loss; under WithFailOnDataLoss(false)
// it is read again from its earliest offset.
func (s *Source) LatestOffset(ctx context.Context, start json.RawMessage) (json.RawMessage, error) {
	st, err := ParsePosition(start)
	if err != nil {
		return nil, fmt.Errorf("kafka: latest offset: start: %w", err)
	}
	topics, err := s.resolveTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka: latest offset: %w", err)
	}
	// A topic of start that a pattern's listing lacks is listed too, so a
	// deleted topic is found as such.
	seen := map[string]bool{}
	for _, t := range topics {
		seen[t] = true
	}
	for _, t := range st.Offsets.topics() {
		if !seen[t] && s.subscribed(t) {
			topics = append(topics, t)
		}
	}
	sort.Strings(topics)
	var last, first Offsets
	ids, err := s.listIDs(ctx, topics, func(ids map[string]string) error {
		var err error
		if last, err = s.latest(ctx, topics); err != nil {
			return err
		}
		if last, err = s.confirmMissing(ctx, st, topics, last); err != nil {
			return err
		}
		first = Offsets{}
		for _, tp := range last.list() {
			if !inStart(st, ids, tp) {
				first, err = s.earliest(ctx, topics)
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kafka: latest offset: %w", err)
	}
	s.mu.Lock()
	avail := s.mu.availNow
	s.mu.Unlock()

	end := Position{Offsets: Offsets{}, TopicIDs: map[string]string{}, From: Offsets{}}
	for _, t := range st.Offsets.topics() {
		if rec, now := st.TopicIDs[t], ids[t]; s.subscribed(t) && !sameTopic(rec, now) {
			if err := s.topicRecreated(t, rec, now, st.Offsets[t]); err != nil {
				return nil, err
			}
		}
	}
	type cand struct {
		tp          topicPartition
		from, avail int64
		fresh       bool // not in start: added only once it has records, with its from
	}
	var cands []cand
	// Partitions of start.
	for _, tp := range st.Offsets.list() {
		from := st.Offsets[tp.topic][tp.partition]
		if !s.subscribed(tp.topic) {
			s.c.logger.Info("kafka: topic no longer subscribed; dropping it from the offsets", "topic", tp.topic, "partition", tp.partition)
			continue
		}
		if !sameTopic(st.TopicIDs[tp.topic], ids[tp.topic]) {
			continue // created again: its partitions are read as new ones
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
				Reason: "the partition now ends below the recorded offset (truncated); continuing from its end"}, 0); err != nil {
				return nil, err
			}
			end.Offsets.set(tp.topic, tp.partition, l)
			s.setStats(tp, from, l, l)
			continue
		}
		end.Offsets.set(tp.topic, tp.partition, from)
		cands = append(cands, cand{tp: tp, from: from, avail: l})
	}
	// Partitions new since start, or of a topic created again.
	for _, tp := range last.list() {
		if inStart(st, ids, tp) {
			continue
		}
		lo, ok := first.get(tp.topic, tp.partition)
		if !ok {
			continue // its start was not listed: the next planning adds it
		}
		cands = append(cands, cand{tp: tp, from: lo, avail: last[tp.topic][tp.partition], fresh: true})
	}
	sort.Slice(cands, func(a, b int) bool {
		x, y := cands[a].tp, cands[b].tp
		if x.topic != y.topic {
			return x.topic < y.topic
		}
		return x.partition < y.partition
	})
	lags := make([]int64, len(cands))
	for i, c := range cands {
		l := c.avail
		if avail != nil {
			a, ok := avail.Offsets.get(c.tp.topic, c.tp.partition)
			if !ok || !sameTopic(avail.TopicIDs[c.tp.topic], ids[c.tp.topic]) {
				a = c.from // not available when PrepareAvailableNow looked
			}
			l = min(l, max(a, c.from))
		}
		lags[i] = l - c.from
	}
	take := spread(s.c.maxPerTrigger, lags)
	for i, c := range cands {
		e := c.from + take[i]
		switch {
		case !c.fresh:
			end.Offsets.set(c.tp.topic, c.tp.partition, e)
		case e > c.from:
			end.Offsets.set(c.tp.topic, c.tp.partition, e)
			end.From.set(c.tp.topic, c.tp.partition, c.from)
		}
		s.setStats(c.tp, c.from, e, c.avail)
	}
	for _, t := range end.Offsets.topics() {
		if id := ids[t]; id != "" {
			end.TopicIDs[t] = id
		} else if id := st.TopicIDs[t]; id != "" {
			end.TopicIDs[t] = id // brokers that stopped reporting ids: keep the recorded one
		}
	}
	if end.equalTo(st) {
		return start, nil // nothing new: start itself, whatever its version
	}
	return end.encode(), nil
}

// inStart reports whether start holds tp under the topic's current id.
func inStart(st Position, ids map[string]string, tp topicPartition) bool {
	_, ok := st.Offsets.get(tp.topic, tp.partition)
	return ok && sameTopic(st.TopicIDs[tp.topic], ids[tp.topic])
}

// topicRecreated fails with a *DataLossError naming both ids under
// WithFailOnDataLoss, or logs and counts the topic, whose partitions are
// then planned as new ones (from their log start offset).
func (s *Source) topicRecreated(topic, recorded, now string, offs map[int32]int64) error {
	recordedOffs := Offsets{topic: offs}
	e := &DataLossError{Topic: topic, Partition: -1, Expected: -1, Available: -1, RecordedTopicID: recorded, TopicID: now,
		Reason: fmt.Sprintf("the recorded offsets %s belong to the deleted topic; WithFailOnDataLoss(false) reads the new topic from its earliest offset",
			recordedOffs.encode())}
	if s.c.failOnDataLoss {
		return e
	}
	s.c.logger.Warn("kafka: topic deleted and created again; reading it again from its earliest offset",
		"topic", topic, "recordedTopicId", recorded, "topicId", now, "recordedOffsets", string(recordedOffs.encode()))
	s.mu.Lock()
	s.mu.recreated++
	s.mu.Unlock()
	return nil
}

// confirmMissing asks again, a few times, for partitions of start that
// the listing lacks, so a metadata hiccup is never taken for a deleted
// partition (which WithFailOnDataLoss(false) would drop, and later re-read
// from its log start).
func (s *Source) confirmMissing(ctx context.Context, st Position, topics []string, last Offsets) (Offsets, error) {
	for try := 0; try < 3; try++ {
		missing := false
		for _, tp := range st.Offsets.list() {
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
	attrs := []any{"topic", e.Topic, "partition", e.Partition, "expected", e.Expected, "available", e.Available, "reason", e.Reason}
	if e.RecordedTopicID != "" {
		attrs = append(attrs, "recordedTopicId", e.RecordedTopicID, "topicId", e.TopicID)
	}
	s.c.logger.Warn("kafka: skipping lost data", attrs...)
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
	st := Stats{DataLossGaps: s.mu.gaps, SkippedOffsets: s.mu.skipped, TopicsRecreated: s.mu.recreated,
		DeadLetters: s.mu.dead, DeadLettersSkipped: s.mu.deadSkipped}
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
