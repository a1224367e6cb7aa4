package kafkasink

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
)

// DefaultProgressTopic is the compacted topic holding batch markers.
const DefaultProgressTopic = "_onceflow_progress"

// Option configures a Sink (see New).
type Option func(*config)

type valueKind int

const (
	valueJSON valueKind = iota
	valueColumn
)

type config struct {
	brokers       []string
	topic         string
	name          string
	txnID         string
	progressTopic string
	timeout       time.Duration
	keyColumn     string
	tsColumn      string
	value         valueKind
	jsonColumns   []string
	valueColumn   string
	atLeastOnce   bool
	tls           *tls.Config
	sasl          sasl.Mechanism
	extra         []kgo.Opt
	logger        *slog.Logger
}

func defaults() config {
	return config{
		progressTopic: DefaultProgressTopic,
		timeout:       60 * time.Second,
		logger:        slog.New(slog.DiscardHandler),
	}
}

// WithBrokers sets the seed brokers (host:port). Required; no default.
func WithBrokers(addrs ...string) Option {
	return func(c *config) { c.brokers = append(c.brokers, addrs...) }
}

// WithTopic sets the output topic, which must exist. Required; no default.
func WithTopic(topic string) Option { return func(c *config) { c.topic = topic } }

// WithName names the sink within its query (default: the output topic). It is
// part of the transactional id, so two sinks of one query need different
// names, and a sink keeps its name across restarts.
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithTransactionalID overrides the transactional id (default "onceflow-" +
// query id + "-" + name). It must be stable across restarts of the query
// and never shared by two queries.
func WithTransactionalID(id string) Option { return func(c *config) { c.txnID = id } }

// WithProgressTopic sets the compacted topic holding batch markers (default
// DefaultProgressTopic); Start creates it, with cleanup.policy=compact, if
// missing.
func WithProgressTopic(topic string) Option { return func(c *config) { c.progressTopic = topic } }

// WithTransactionTimeout sets the transaction timeout (default 60s). Start
// refuses a timeout above the broker's transaction.max.timeout.ms. See the
// package documentation for the trade-off.
func WithTransactionTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithKeyColumn takes each record's key from this column (utf8, binary or an
// integer, written as decimal text); a null is a null key. Default: no key.
func WithKeyColumn(name string) Option { return func(c *config) { c.keyColumn = name } }

// WithTimestampColumn sets each record's Kafka timestamp from this column (a
// timestamp of any unit; null keeps the producer's clock). Default: the
// producer's clock, which differs between a batch's attempts (only the
// committed attempt is ever visible).
func WithTimestampColumn(name string) Option { return func(c *config) { c.tsColumn = name } }

// WithValueJSON writes each row as a JSON object of the named columns, or of
// all columns when none are named (the default). See the package
// documentation for the encoding.
func WithValueJSON(columns ...string) Option {
	return func(c *config) { c.value, c.jsonColumns = valueJSON, columns }
}

// WithValueColumn writes this column's bytes (utf8 or binary) as the value
// (default: WithValueJSON of all columns).
func WithValueColumn(name string) Option {
	return func(c *config) { c.value, c.valueColumn = valueColumn, name }
}

// WithAtLeastOnce turns transactions off: records are produced by an
// idempotent producer, no marker is written, and a re-run batch is written
// again. Guarantee reports "at-least-once". Only for outputs whose readers
// deduplicate. Default: off (one transaction per batch, exactly-once).
func WithAtLeastOnce() Option { return func(c *config) { c.atLeastOnce = true } }

// WithTLS dials the brokers with this TLS configuration (default: none, plain TCP).
func WithTLS(cfg *tls.Config) Option { return func(c *config) { c.tls = cfg } }

// WithSASL authenticates with this mechanism (default: none).
func WithSASL(m sasl.Mechanism) Option { return func(c *config) { c.sasl = m } }

// WithClientOpts passes further options to the franz-go clients, after ours
// (default: none).
func WithClientOpts(opts ...kgo.Opt) Option {
	return func(c *config) { c.extra = append(c.extra, opts...) }
}

// WithLogger sets the logger (default: none, nothing is logged).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

func (c *config) validate() error {
	var problems []string
	if len(c.brokers) == 0 {
		problems = append(problems, "no brokers")
	}
	if c.topic == "" {
		problems = append(problems, "no output topic")
	}
	if c.progressTopic == "" {
		problems = append(problems, "empty progress topic")
	}
	if c.progressTopic == c.topic && c.topic != "" {
		problems = append(problems, "the progress topic must differ from the output topic")
	}
	if c.timeout < time.Second {
		problems = append(problems, fmt.Sprintf("transaction timeout %v is below 1s", c.timeout))
	}
	if c.value == valueColumn && c.valueColumn == "" {
		problems = append(problems, "WithValueColumn needs a column name")
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrConfig, strings.Join(problems, "; "))
}
