package kafka

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Option configures a Source (see New).
type Option func(*config)

type startKind int

const (
	startEarliest startKind = iota
	startLatest
	startSpecific
	startTimestamp
)

// StartingPosition is where a query's first batch starts; build one with
// Earliest, Latest, SpecificOffsets or AtTimestamp.
type StartingPosition struct {
	kind     startKind
	specific json.RawMessage
	at       time.Time
}

// Earliest starts at each partition's log start offset (the default).
func Earliest() StartingPosition { return StartingPosition{kind: startEarliest} }

// Latest starts at each partition's end: under read_committed the last
// stable offset, otherwise the high watermark.
func Latest() StartingPosition { return StartingPosition{kind: startLatest} }

// SpecificOffsets starts at the given offsets, in the Offsets JSON form
// ({"payments":{"0":42}}). An offset of -2 means earliest and -1 latest for
// that partition; partitions not named start at earliest.
func SpecificOffsets(offsetsJSON string) StartingPosition {
	return StartingPosition{kind: startSpecific, specific: json.RawMessage(offsetsJSON)}
}

// AtTimestamp starts, in each partition, at the first record whose
// timestamp is at or after t (resolved once, by ListOffsets, when the
// query's first batch is planned); a partition with no such record starts
// at its end.
func AtTimestamp(t time.Time) StartingPosition {
	return StartingPosition{kind: startTimestamp, at: t}
}

type decoderKind int

const (
	decodeRaw decoderKind = iota
	decodeString
	decodeJSON
)

type config struct {
	brokers        []string
	topics         []string
	pattern        *regexp.Regexp
	patternErr     error
	start          StartingPosition
	maxPerTrigger  int64
	readCommitted  bool
	failOnDataLoss bool
	logger         *slog.Logger
	tls            *tls.Config
	sasl           sasl.Mechanism
	extra          []kgo.Opt
	decoder        decoderKind
	jsonSchema     *arrow.Schema
	tombstones     bool
	deadTopic      string
	deadProgress   string
	deadTxnID      string
	deadTimeout    time.Duration
	deadDir        string
	mem            memory.Allocator
	rowsPerRecord  int
	fetchMaxBytes  int32
	partitions     []int32 // WithPartitions; nil: every partition
	partitionsSet  bool
}

func defaults() config {
	return config{
		start:          Earliest(),
		readCommitted:  true,
		failOnDataLoss: true,
		logger:         slog.New(slog.DiscardHandler),
		mem:            memory.DefaultAllocator,
		rowsPerRecord:  8192,
		fetchMaxBytes:  16 << 20,
		deadTimeout:    60 * time.Second,
	}
}

// WithBrokers sets the seed brokers (host:port). Required; no default.
func WithBrokers(addrs ...string) Option {
	return func(c *config) { c.brokers = append(c.brokers, addrs...) }
}

// WithTopics sets the topics to read; every partition of each is read.
// Exactly one of WithTopics and WithTopicPattern is required; no default.
func WithTopics(topics ...string) Option {
	return func(c *config) { c.topics = append(c.topics, topics...) }
}

// WithTopicPattern reads every topic whose name matches the regular expression
// (anchored by the caller if wanted). Topics and partitions created later
// are found when the next batch is planned, so they are recorded in that
// batch's write-ahead-log entry. Default: none (see WithTopics).
func WithTopicPattern(expr string) Option {
	return func(c *config) { c.pattern, c.patternErr = regexp.Compile(expr) }
}

// WithPartitions restricts the source to these partition numbers of every
// topic it reads: only they are planned (LatestOffset, InitialOffset) and
// read, and the source's identity in the checkpoint names them, so a
// restart with other partitions is refused. It is how a scaled-out query
// (package scaleout) gives each task its partition, or its partition of
// each co-partitioned topic. A partition named here that a topic of
// WithTopics lacks fails the first batch's planning; under WithTopicPattern
// such a topic is read for the partitions it has. Default: every
// partition, including partitions created later.
func WithPartitions(partitions ...int32) Option {
	return func(c *config) {
		c.partitions = append(c.partitions, partitions...)
		c.partitionsSet = true
	}
}

// WithStartingOffsets sets where the query's first batch starts (default
// Earliest()). It matters only once: later batches start where the
// previous one ended, as recorded in the engine's offset log.
func WithStartingOffsets(s StartingPosition) Option {
	return func(c *config) { c.start = s }
}

// WithMaxOffsetsPerTrigger caps the number of offsets one batch covers, spread
// across partitions in proportion to their lag, each lagging partition
// getting at least one offset when n allows (default 0: no cap).
func WithMaxOffsetsPerTrigger(n int64) Option {
	return func(c *config) { c.maxPerTrigger = n }
}

// WithReadUncommitted reads records of open and aborted transactions too, and
// takes the high watermark as a partition's end. The default is
// read_committed: only committed records, and the last stable offset as the
// end.
func WithReadUncommitted() Option {
	return func(c *config) { c.readCommitted = false }
}

// WithFailOnDataLoss chooses what happens when records the query must read are
// gone (below the log start offset, or the topic or partition deleted):
// true (the default) fails with a *DataLossError; false skips the gap,
// logs it and counts it in Stats.
func WithFailOnDataLoss(fail bool) Option {
	return func(c *config) { c.failOnDataLoss = fail }
}

// WithLogger sets the logger for skipped gaps, recreated topics and dead
// letters (default: none, nothing is logged).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithTLS dials the brokers with this TLS configuration (default: none,
// plain TCP).
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) { c.tls = cfg }
}

// WithSASL authenticates with this mechanism (plain, scram, ...; default:
// none).
func WithSASL(m sasl.Mechanism) Option {
	return func(c *config) { c.sasl = m }
}

// WithClientOpts passes further options to the franz-go client, after ours
// (default: none).
func WithClientOpts(opts ...kgo.Opt) Option {
	return func(c *config) { c.extra = append(c.extra, opts...) }
}

// WithValueRaw emits the value as a binary column "value" (the default).
func WithValueRaw() Option {
	return func(c *config) { c.decoder, c.jsonSchema = decodeRaw, nil }
}

// WithValueString emits the value as a utf8 column "value"; a value that is not
// valid UTF-8 does not decode. Default: WithValueRaw.
func WithValueString() Option {
	return func(c *config) { c.decoder, c.jsonSchema = decodeString, nil }
}

// WithValueJSON decodes each value as a JSON object into the fields of schema,
// which become top-level columns beside the metadata columns. Supported
// field types: utf8, int64 (a JSON integer, such as cents), int32, float64,
// boolean, binary (base64 string), timestamp of any unit (an RFC 3339
// string such as "2026-11-30T10:00:00.123Z"; a fraction finer than the unit
// does not decode). A missing or null field is null when the field is
// nullable and does not decode otherwise. Fields of the object that the
// schema does not name are ignored. Default: WithValueRaw.
func WithValueJSON(schema *arrow.Schema) Option {
	return func(c *config) { c.decoder, c.jsonSchema = decodeJSON, schema }
}

// WithTombstones makes a record whose value is null (a tombstone of a
// compacted topic) decode, under WithValueJSON, as a row whose value fields
// are all null, instead of failing: the way to read a compacted topic as a
// changelog (engine.ChangelogTable with DeleteWhen on a value field that a
// live value always holds). Every field of the schema must then be
// nullable. Default: a null value does not decode.
func WithTombstones() Option {
	return func(c *config) { c.tombstones = true }
}

// WithDeadLetterTopic sends values that do not decode to this topic, which
// must exist, instead of failing the batch: the dead letters of one Read
// are produced in one Kafka transaction with a progress marker per source
// partition, so a read_committed reader of the topic sees each dead letter
// once across crashes and re-runs (see the package documentation). The
// transaction needs a stable transactional id: run the source under the
// engine (OpenCheckpoint keeps one in the checkpoint) or set
// WithDeadLetterTransactionalID. A WithTopicPattern never reads the dead-letter
// topic or its progress topic, and WithTopics must not name them. Default:
// none, a value that does not decode fails the batch.
func WithDeadLetterTopic(topic string) Option {
	return func(c *config) { c.deadTopic = topic }
}

// WithDeadLetterProgressTopic sets the compacted topic holding the dead-letter
// progress markers (default: the dead-letter topic's name followed by
// "-progress"). The source creates it, with cleanup.policy=compact,
// segment.ms=3600000 and one partition, if it is missing; markers go to
// its partition 0. Several queries may share it: each marker is
// keyed by its transactional id.
func WithDeadLetterProgressTopic(topic string) Option {
	return func(c *config) { c.deadProgress = topic }
}

// WithDeadLetterTransactionalID sets the transactional id of the dead-letter
// producer (default: the one OpenCheckpoint creates once and keeps in the
// source's folder of the checkpoint). It must stay the same across
// restarts of the query, so a new process fences the old one and finds its
// markers, and must never be shared by two queries or two sources.
func WithDeadLetterTransactionalID(id string) Option {
	return func(c *config) { c.deadTxnID = id }
}

// WithDeadLetterTransactionTimeout sets the timeout of the dead-letter
// transaction (default 60s): how long the broker keeps a transaction of a
// process that died open before aborting it, holding back read_committed
// readers of the dead-letter topic. A restart with the same transactional
// id aborts it at once. It must not exceed the brokers'
// transaction.max.timeout.ms; the source checks that before its first
// transaction.
func WithDeadLetterTransactionTimeout(d time.Duration) Option {
	return func(c *config) { c.deadTimeout = d }
}

// WithDeadLetterDir writes values that do not decode to JSON-lines files in dir
// instead of failing the batch (see the package documentation). Default:
// none, a value that does not decode fails the batch.
func WithDeadLetterDir(dir string) Option {
	return func(c *config) { c.deadDir = dir }
}

// WithAllocator sets the Arrow allocator of emitted records (default
// memory.DefaultAllocator).
func WithAllocator(mem memory.Allocator) Option {
	return func(c *config) {
		if mem != nil {
			c.mem = mem
		}
	}
}

// WithRowsPerRecord caps the rows of one emitted Arrow record (default 8192).
func WithRowsPerRecord(n int) Option {
	return func(c *config) { c.rowsPerRecord = n }
}

// keeps reports whether the source reads partition p (WithPartitions).
func (c *config) keeps(p int32) bool {
	return !c.partitionsSet || slices.Contains(c.partitions, p)
}

// only drops from o the partitions the source does not read.
func (c *config) only(o Offsets) Offsets {
	if !c.partitionsSet {
		return o
	}
	for t, ps := range o {
		for p := range ps {
			if !c.keeps(p) {
				delete(ps, p)
			}
		}
		if len(ps) == 0 {
			delete(o, t)
		}
	}
	return o
}

// progressTopic is the dead-letter progress topic (see
// WithDeadLetterProgressTopic).
func (c *config) progressTopic() string {
	if c.deadProgress != "" {
		return c.deadProgress
	}
	return c.deadTopic + "-progress"
}

func (c *config) validate() error {
	var problems []string
	if len(c.brokers) == 0 {
		problems = append(problems, "no brokers")
	}
	if c.patternErr != nil {
		problems = append(problems, fmt.Sprintf("topic pattern: %v", c.patternErr))
	}
	if (len(c.topics) == 0) == (c.pattern == nil && c.patternErr == nil) {
		problems = append(problems, "exactly one of WithTopics and WithTopicPattern is required")
	}
	for _, t := range c.topics {
		if t == "" {
			problems = append(problems, "empty topic name")
		}
	}
	if c.maxPerTrigger < 0 {
		problems = append(problems, fmt.Sprintf("WithMaxOffsetsPerTrigger %d is negative", c.maxPerTrigger))
	}
	if c.partitionsSet && len(c.partitions) == 0 {
		problems = append(problems, "WithPartitions names no partition")
	}
	for _, p := range c.partitions {
		if p < 0 {
			problems = append(problems, fmt.Sprintf("WithPartitions: partition %d is negative", p))
		}
	}
	if c.rowsPerRecord <= 0 {
		problems = append(problems, fmt.Sprintf("WithRowsPerRecord %d must be positive", c.rowsPerRecord))
	}
	if c.deadTopic != "" && c.deadDir != "" {
		problems = append(problems, "at most one of WithDeadLetterTopic and WithDeadLetterDir")
	}
	if c.deadTopic == "" && (c.deadProgress != "" || c.deadTxnID != "") {
		problems = append(problems, "WithDeadLetterProgressTopic and WithDeadLetterTransactionalID need WithDeadLetterTopic")
	}
	if c.deadTopic != "" && c.deadTopic == c.progressTopic() {
		problems = append(problems, "the dead-letter progress topic must differ from the dead-letter topic")
	}
	for _, t := range c.topics {
		if c.deadTopic != "" && (t == c.deadTopic || t == c.progressTopic()) {
			problems = append(problems, fmt.Sprintf("topic %q is the source's own dead-letter or progress topic", t))
		}
	}
	if c.deadTimeout <= 0 {
		problems = append(problems, fmt.Sprintf("WithDeadLetterTransactionTimeout %s must be positive", c.deadTimeout))
	}
	if c.start.kind == startSpecific {
		if _, err := parseOffsets(c.start.specific, true); err != nil {
			problems = append(problems, fmt.Sprintf("starting offsets: %v", err))
		}
	}
	if c.decoder == decodeJSON {
		if c.jsonSchema == nil {
			problems = append(problems, "WithValueJSON needs a schema")
		} else {
			for _, f := range c.jsonSchema.Fields() {
				if !jsonTypeSupported(f.Type) {
					problems = append(problems, fmt.Sprintf("WithValueJSON field %q: type %s not supported", f.Name, f.Type))
				}
				if c.tombstones && !f.Nullable {
					problems = append(problems, fmt.Sprintf("WithTombstones: WithValueJSON field %q must be nullable (a tombstone's fields are null)", f.Name))
				}
				if isMetaColumn(f.Name) {
					problems = append(problems, fmt.Sprintf("WithValueJSON field %q collides with a metadata column", f.Name))
				}
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	msg := problems[0]
	for _, p := range problems[1:] {
		msg += "; " + p
	}
	return fmt.Errorf("%w: %s", ErrConfig, msg)
}
