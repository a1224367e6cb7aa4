package postgres

import (
	"fmt"
	"log/slog"
	"time"
)

// MergeOp says how an incoming value combines with the value already stored
// under the same key.
type MergeOp int

const (
	// MergeSet overwrites the stored value (SET c = EXCLUDED.c): the row
	// carries the column's full new value. The default for every column.
	MergeSet MergeOp = iota
	// MergeAdd adds the incoming value to the stored one
	// (SET c = t.c + EXCLUDED.c, a NULL on either side counting as absent):
	// the row carries a delta. Only safe under the progress guard of
	// NewOffsetsInSink; NewUpsert refuses it.
	MergeAdd
)

func (m MergeOp) String() string {
	switch m {
	case MergeSet:
		return "set"
	case MergeAdd:
		return "add"
	default:
		return fmt.Sprintf("MergeOp(%d)", int(m))
	}
}

// Default values of the options.
const (
	DefaultProgressTable  = "onceflow_progress"
	DefaultBatchIDColumn  = "onceflow_batch_id"
	DefaultMaxAttempts    = 5
	DefaultInitialBackoff = 100 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
)

type config struct {
	schema       string
	progress     string
	progressSet  bool
	batchCol     string
	batchColSet  bool
	keys         []string
	merge        map[string]MergeOp
	mergeOrder   []string // columns in the order merges were given, for messages
	createTables bool
	truncateTS   bool
	logger       *slog.Logger

	maxAttempts    int
	initialBackoff time.Duration
	maxBackoff     time.Duration
}

func defaults() config {
	return config{
		progress:       DefaultProgressTable,
		batchCol:       DefaultBatchIDColumn,
		merge:          map[string]MergeOp{},
		logger:         slog.New(slog.DiscardHandler),
		maxAttempts:    DefaultMaxAttempts,
		initialBackoff: DefaultInitialBackoff,
		maxBackoff:     DefaultMaxBackoff,
	}
}

// Option configures NewOffsetsInSink, NewUpsert and NewGuard.
type Option func(*config)

// WithTableSchema qualifies the target and progress tables with a PostgreSQL
// schema. Default: none, so the connection's search_path decides. Table and
// schema names are identifiers, never SQL: "a.b" is a table named "a.b".
func WithTableSchema(name string) Option { return func(c *config) { c.schema = name } }

// WithProgressTable names the progress table of the offsets-in-sink guard.
// Default: DefaultProgressTable ("onceflow_progress"). Several jobs may share
// one progress table: each has its own row. Not valid for NewUpsert.
func WithProgressTable(name string) Option {
	return func(c *config) { c.progress, c.progressSet = name, true }
}

// WithBatchIDColumn names the bigint column of NewUpsert's target table that
// records, in every row, the id of the batch that last wrote it. The upsert
// changes a row only when the stored id is at most the incoming batch's
// (or NULL), so an older batch (a stalled driver's) never overwrites a newer
// one and a repeated batch rewrites the same values. Default:
// DefaultBatchIDColumn ("onceflow_batch_id"). Not valid for
// NewOffsetsInSink, whose progress row does that job.
func WithBatchIDColumn(name string) Option {
	return func(c *config) { c.batchCol, c.batchColSet = name, true }
}

// WithKeyColumns names the columns that identify a row of the target table; they
// must carry a unique index (a primary key, say), which ON CONFLICT uses.
// Default: none, so rows are inserted without ON CONFLICT (append). Required
// by NewUpsert and by MergeAdd.
func WithKeyColumns(cols ...string) Option {
	return func(c *config) { c.keys = append([]string(nil), cols...) }
}

// WithMerge sets how the named non-key columns combine with stored values.
// Default: MergeSet for every column.
func WithMerge(op MergeOp, cols ...string) Option {
	return func(c *config) {
		for _, col := range cols {
			if _, ok := c.merge[col]; !ok {
				c.mergeOrder = append(c.mergeOrder, col)
			}
			c.merge[col] = op
		}
	}
}

// WithCreateTables makes Start create the progress table, and ValidateSchema
// the target table (columns typed from the output schema, the key columns as
// primary key), when they do not exist. Default: false; missing tables are an
// error.
func WithCreateTables(on bool) Option { return func(c *config) { c.createTables = on } }

// WithTruncateTimestamps lets an output timestamp column with more
// fractional digits than its PostgreSQL column keeps be written truncated
// toward the past to the column's precision: timestamp[ns] into timestamptz
// or timestamp (microseconds), or any unit into timestamp(p). Default: off,
// and such a column is refused by ValidateSchema (and by WithCreateTables,
// which would give it microseconds) with a *ColumnError naming it, because
// truncation is silent loss and makes keys that differ only in the cut
// digits collide. With it, two such keys in one batch fail the batch with
// ErrDuplicateKey naming both rows (or are summed, when every non-key column
// is an add merge), as any repeated key.
func WithTruncateTimestamps() Option { return func(c *config) { c.truncateTS = true } }

// WithLogger receives one line per skipped batch and per retried attempt.
// Default: nothing is logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithRetry bounds the retries of a batch transaction that failed with an
// error a new attempt can escape (a lost connection, an administrator
// shutdown (57P01), a serialization failure (40001), a deadlock (40P01), a
// lock timeout (55P03), short resources (class 53); see the package
// documentation): at most maxAttempts attempts in all, waiting initial,
// 2×initial, … capped at max between them (each wait shortened by a random
// jitter of up to half). Errors every attempt would meet (ErrRejected) are
// never retried. Defaults: DefaultMaxAttempts (5), DefaultInitialBackoff
// (100ms), DefaultMaxBackoff (5s). maxAttempts 1 disables retries.
func WithRetry(maxAttempts int, initial, max time.Duration) Option {
	return func(c *config) { c.maxAttempts, c.initialBackoff, c.maxBackoff = maxAttempts, initial, max }
}

func (c *config) validate() error {
	if c.maxAttempts < 1 {
		return fmt.Errorf("%w: WithRetry maxAttempts %d: want at least 1", ErrConfig, c.maxAttempts)
	}
	if c.initialBackoff < 0 || c.maxBackoff < c.initialBackoff {
		return fmt.Errorf("%w: WithRetry backoff %v..%v: want 0 <= initial <= max", ErrConfig, c.initialBackoff, c.maxBackoff)
	}
	if c.progress == "" {
		return fmt.Errorf("%w: WithProgressTable with an empty name", ErrConfig)
	}
	if c.batchCol == "" {
		return fmt.Errorf("%w: WithBatchIDColumn with an empty name", ErrConfig)
	}
	seen := map[string]bool{}
	for _, k := range c.keys {
		if k == "" {
			return fmt.Errorf("%w: empty key column name", ErrConfig)
		}
		if seen[k] {
			return fmt.Errorf("%w: key column %q given twice", ErrConfig, k)
		}
		seen[k] = true
	}
	for _, col := range c.mergeOrder {
		op := c.merge[col]
		if op != MergeSet && op != MergeAdd {
			return fmt.Errorf("%w: column %q: unknown merge %v", ErrConfig, col, op)
		}
		if seen[col] {
			return fmt.Errorf("%w: column %q is a key column and cannot have a merge", ErrConfig, col)
		}
		if op == MergeAdd && len(c.keys) == 0 {
			return fmt.Errorf("%w: column %q: an add merge needs WithKeyColumns", ErrConfig, col)
		}
	}
	return nil
}
