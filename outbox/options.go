package outbox

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/storage"
)

// Option configures a Worker.
type Option func(*config)

type config struct {
	brokers     []string
	topic       string
	cp          storage.Store
	endpoint    *url.URL
	client      *http.Client
	headers     http.Header
	maxAttempts int
	backoff     time.Duration
	backoffMax  time.Duration
	idField     string
	deadLetter  DeadLetter
	reg         prometheus.Registerer
	kopts       []kgo.Opt
	idleExit    time.Duration
	keep        int
	pg          *pgxpool.Pool
	table       string
}

func defaults() config {
	return config{
		client:      &http.Client{Timeout: 10 * time.Second},
		headers:     http.Header{},
		maxAttempts: 5,
		backoff:     100 * time.Millisecond,
		backoffMax:  10 * time.Second,
		idField:     "id",
		keep:        10,
	}
}

// WithBrokers sets the Kafka seed brokers (required).
func WithBrokers(addrs ...string) Option {
	return func(c *config) { c.brokers = append([]string(nil), addrs...) }
}

// WithTopic sets the intents topic (required).
func WithTopic(topic string) Option { return func(c *config) { c.topic = topic } }

// WithPostgres reads intents from an outbox table instead of Kafka: a
// table with a bigint column seq (seq bigserial primary key) that the
// query writes with the offsets-in-sink sink (foreachbatch/postgres
// NewOffsetsInSink, or rows added inside Guard.Run), so each batch's
// intents commit in the transaction that advances its progress row. Each
// row is POSTed as its JSON (row_to_json). The caller owns the pool.
func WithPostgres(pool *pgxpool.Pool, table string) Option {
	return func(c *config) { c.pg, c.table = pool, table }
}

// WithCheckpoint sets the storage of the worker's own checkpoint
// (required): positions/ and deadletter/.
func WithCheckpoint(s storage.Store) Option { return func(c *config) { c.cp = s } }

// WithEndpoint sets the URL every intent is POSTed to (required).
func WithEndpoint(u string) Option {
	return func(c *config) {
		p, err := url.Parse(u)
		if err != nil {
			c.endpoint = &url.URL{Opaque: "invalid"}
			return
		}
		c.endpoint = p
	}
}

// WithHTTPClient sets the HTTP client. Default: a client with a 10 s
// timeout.
func WithHTTPClient(h *http.Client) Option { return func(c *config) { c.client = h } }

// WithHeader adds a header to every POST (an Authorization token, say);
// its value never appears in errors.
func WithHeader(name, value string) Option { return func(c *config) { c.headers.Add(name, value) } }

// WithMaxAttempts sets how many failed attempts send an intent to the dead
// letter. Default 5.
func WithMaxAttempts(n int) Option { return func(c *config) { c.maxAttempts = n } }

// WithBackoff sets the wait after the first failed attempt, doubled after
// each further one up to max. Default 100 ms up to 10 s.
func WithBackoff(base, max time.Duration) Option {
	return func(c *config) { c.backoff, c.backoffMax = base, max }
}

// WithIDField names the JSON field of an intent that holds its id.
// Default "id".
func WithIDField(name string) Option { return func(c *config) { c.idField = name } }

// WithDeadLetter sets where intents go after the last failed attempt.
// Default: a JSON file per intent under <checkpoint>/deadletter/.
func WithDeadLetter(d DeadLetter) Option { return func(c *config) { c.deadLetter = d } }

// WithRegisterer registers the worker's metrics on r. Default: none.
func WithRegisterer(r prometheus.Registerer) Option { return func(c *config) { c.reg = r } }

// WithKafkaOpts adds franz-go client options (TLS, SASL).
func WithKafkaOpts(opts ...kgo.Opt) Option {
	return func(c *config) { c.kopts = append(c.kopts, opts...) }
}

// WithIdleExit makes Run return nil once no intent has arrived for d and
// every partition is delivered up to its read_committed end (for batch
// use and tests). Default 0: run until the context ends.
func WithIdleExit(d time.Duration) Option { return func(c *config) { c.idleExit = d } }

func (c *config) validate() error {
	var errs []string
	switch {
	case c.pg != nil:
		if c.table == "" {
			errs = append(errs, "no outbox table (WithPostgres)")
		}
		if len(c.brokers) > 0 || c.topic != "" {
			errs = append(errs, "both Kafka (WithBrokers, WithTopic) and PostgreSQL (WithPostgres): choose one")
		}
	default:
		if len(c.brokers) == 0 {
			errs = append(errs, "no brokers (WithBrokers)")
		}
		if c.topic == "" {
			errs = append(errs, "no intents topic (WithTopic)")
		}
	}
	if c.cp == nil {
		errs = append(errs, "no checkpoint storage (WithCheckpoint)")
	}
	switch {
	case c.endpoint == nil:
		errs = append(errs, "no endpoint (WithEndpoint)")
	case c.endpoint.Scheme != "http" && c.endpoint.Scheme != "https":
		errs = append(errs, fmt.Sprintf("endpoint %q is not an http(s) URL", c.endpoint.Redacted()))
	}
	if c.maxAttempts < 1 {
		errs = append(errs, fmt.Sprintf("max attempts %d is below 1", c.maxAttempts))
	}
	if c.backoff <= 0 || c.backoffMax < c.backoff {
		errs = append(errs, fmt.Sprintf("backoff %s up to %s: both must be positive, the cap at least the base", c.backoff, c.backoffMax))
	}
	if len(errs) == 0 {
		return nil
	}
	msg := "outbox: invalid options:"
	for _, e := range errs {
		msg += "\n  - " + e
	}
	return fmt.Errorf("%s", msg)
}
