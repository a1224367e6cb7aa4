package scaleout

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Option configures NewWorker.
type Option func(*config)

type config struct {
	brokers          []string
	group            string
	topic            string
	extra            []kgo.Opt
	logger           *slog.Logger
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	heartbeat        time.Duration
	stopTimeout      time.Duration
	retryMin         time.Duration
	retryMax         time.Duration
	listener         func(Event)
}

func defaults() config {
	return config{
		logger:           slog.New(slog.DiscardHandler),
		sessionTimeout:   45 * time.Second,
		rebalanceTimeout: 60 * time.Second,
		heartbeat:        3 * time.Second,
		stopTimeout:      20 * time.Second,
		retryMin:         500 * time.Millisecond,
		retryMax:         5 * time.Second,
	}
}

// WithBrokers sets the seed brokers (host:port). Required.
func WithBrokers(addrs ...string) Option {
	return func(c *config) { c.brokers = append(c.brokers, addrs...) }
}

// WithGroup sets the consumer group the workers of one query join. Every
// worker of the query uses the same group, and no other query does.
// Required.
func WithGroup(group string) Option { return func(c *config) { c.group = group } }

// WithTopic sets the lead input topic: one task per partition of it. Other
// topics the query reads must be co-partitioned with it (same partition
// count and key mapping); task t reads their partition t too. Required.
func WithTopic(topic string) Option { return func(c *config) { c.topic = topic } }

// WithClientOpts passes further options to the franz-go group client,
// after the worker's (TLS, SASL, ...). Default: none.
func WithClientOpts(opts ...kgo.Opt) Option {
	return func(c *config) { c.extra = append(c.extra, opts...) }
}

// WithLogger sets the logger of task starts, stops and retries. Default:
// none.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithSessionTimeout sets the group session timeout (default 45s, Kafka's):
// how long a worker that stopped heartbeating (SIGKILL, a network cut)
// keeps its tasks before the group gives them to the others. It bounds the
// "kill to resumed" time from below. The heartbeat interval is a tenth of
// it, at most 3s.
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) {
		c.sessionTimeout = d
		c.heartbeat = min(3*time.Second, d/10)
	}
}

// WithRebalanceTimeout sets the group rebalance timeout (default 60s): how
// long the group waits for a member to finish its revoke callback, which
// stops the revoked tasks. It must exceed WithStopTimeout.
func WithRebalanceTimeout(d time.Duration) Option {
	return func(c *config) { c.rebalanceTimeout = d }
}

// WithStopTimeout sets how long a revoked task may take to finish its batch
// in flight before its context is cancelled and the batch abandoned (it is
// re-run by the next owner). Default 20s.
func WithStopTimeout(d time.Duration) Option { return func(c *config) { c.stopTimeout = d } }

// WithRetryBackoff sets the wait before a task's query is built and run
// again after it failed (for example on a checkpoint the previous owner
// still holds): first min, doubling up to max. Default 500ms to 5s.
func WithRetryBackoff(min, max time.Duration) Option {
	return func(c *config) { c.retryMin, c.retryMax = min, max }
}

// WithTaskListener calls fn with each task event (see Event), one call at a
// time, on the worker's goroutines; fn must not block for long. Default:
// none.
func WithTaskListener(fn func(Event)) Option { return func(c *config) { c.listener = fn } }

func (c *config) validate() error {
	var problems []string
	if len(c.brokers) == 0 {
		problems = append(problems, "no brokers (WithBrokers)")
	}
	if c.group == "" {
		problems = append(problems, "no group (WithGroup)")
	}
	if c.topic == "" {
		problems = append(problems, "no lead topic (WithTopic)")
	}
	if c.sessionTimeout <= 0 || c.stopTimeout <= 0 || c.retryMin <= 0 || c.retryMax < c.retryMin {
		problems = append(problems, fmt.Sprintf("timeouts must be positive and the backoff's max at least its min (session %s, stop %s, backoff %s..%s)",
			c.sessionTimeout, c.stopTimeout, c.retryMin, c.retryMax))
	}
	if c.rebalanceTimeout <= c.stopTimeout {
		problems = append(problems, fmt.Sprintf("the rebalance timeout %s must exceed the stop timeout %s: a revoke waits for the revoked tasks to stop",
			c.rebalanceTimeout, c.stopTimeout))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrConfig, strings.Join(problems, "; "))
}
