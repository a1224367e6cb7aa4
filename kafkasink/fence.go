package kafkasink

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FenceTransactionalID ends whatever a producer with transactional id
// transactionalID left behind: it runs InitProducerID for the id, so the
// brokers abort the id's open transaction (or finish its commit if that
// was already prepared) and bump the id's epoch, which fences every
// producer still using it. A read_committed reader stalled behind the open
// transaction moves on once the abort markers are written.
//
// It is for an id no query uses any more: one abandoned when a sink's
// transactional id changed (another WithName, WithTransactionalID or query
// id), whose last transaction was left open by a crash and would otherwise
// hold back read_committed readers of the output topic until the
// transaction timeout. Fencing the id of a running sink makes that sink
// fail with ErrFenced until it is started again. An id the brokers do not
// know is created, with nothing to abort, and expires after the brokers'
// transactional.id.expiration.ms.
//
// Of the options only the connection ones count: WithBrokers (required),
// WithTLS, WithSASL, WithClientOpts, and WithTransactionTimeout (default
// 60s), which InitProducerID checks against the brokers' maximum; the
// others are ignored.
func FenceTransactionalID(ctx context.Context, transactionalID string, opts ...Option) error {
	c := defaults()
	for _, o := range opts {
		o(&c)
	}
	var problems []string
	if transactionalID == "" {
		problems = append(problems, "empty transactional id")
	}
	if len(c.brokers) == 0 {
		problems = append(problems, "no brokers")
	}
	if c.timeout < time.Second {
		problems = append(problems, fmt.Sprintf("transaction timeout %v is below 1s", c.timeout))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: fence transactional id: %s", ErrConfig, strings.Join(problems, "; "))
	}
	cl, err := kgo.NewClient(c.clientOpts(
		kgo.TransactionalID(transactionalID),
		kgo.TransactionTimeout(c.timeout),
	)...)
	if err != nil {
		return fmt.Errorf("kafkasink: fence %q: client: %w", transactionalID, err)
	}
	defer cl.Close()
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return fmt.Errorf("kafkasink: fence %q: init producer id: %w", transactionalID, err)
	}
	return nil
}
