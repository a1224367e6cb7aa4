package iceberg

import (
	"errors"
	"fmt"
)

// Mode is how a batch's rows change the table.
type Mode int

const (
	// Append adds the batch's rows (the default).
	Append Mode = iota
	// Update upserts the batch's rows by the key columns (WithKeys): one
	// snapshot holds an equality-delete file of the batch's keys and a
	// data file of its rows.
	Update
	// Complete replaces the table's rows with the batch's rows.
	Complete
)

func (m Mode) String() string {
	switch m {
	case Append:
		return "append"
	case Update:
		return "update"
	case Complete:
		return "complete"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Partition is one field of the table's partition spec: a source column
// and a transform. Build it with Identity, Day, Hour or Bucket.
type Partition struct {
	Column    string
	Transform string // "identity", "day", "hour", "bucket"
	Buckets   int    // for "bucket"
}

// Identity partitions by the column's value.
func Identity(col string) Partition { return Partition{Column: col, Transform: "identity"} }

// Day partitions by the day (UTC) of a date or timestamp column.
func Day(col string) Partition { return Partition{Column: col, Transform: "day"} }

// Hour partitions by the hour (UTC) of a timestamp column.
func Hour(col string) Partition { return Partition{Column: col, Transform: "hour"} }

// Bucket partitions by the column's Iceberg hash modulo n.
func Bucket(col string, n int) Partition {
	return Partition{Column: col, Transform: "bucket", Buckets: n}
}

// SinkOption configures NewSink.
type SinkOption func(*sinkConfig)

type sinkConfig struct {
	partitions     []Partition
	mode           Mode
	keys           []string
	targetFileSize int64
	commitRetries  int
	props          map[string]string
}

// WithPartitionSpec sets the partition spec of a table the sink creates.
// An existing table keeps its own spec. Default: unpartitioned.
func WithPartitionSpec(fields ...Partition) SinkOption {
	return func(c *sinkConfig) { c.partitions = append(c.partitions, fields...) }
}

// WithMode sets how batches change the table. Default: Append. Update
// needs WithKeys.
func WithMode(m Mode) SinkOption { return func(c *sinkConfig) { c.mode = m } }

// WithKeys names the key columns of Update mode. Default: none.
func WithKeys(cols ...string) SinkOption {
	return func(c *sinkConfig) { c.keys = append(c.keys, cols...) }
}

// WithTargetFileSize caps a data file's size in bytes; a larger batch is
// split into several files. Default: the table's write.target-file-size-bytes
// (512 MiB).
func WithTargetFileSize(bytes int64) SinkOption {
	return func(c *sinkConfig) { c.targetFileSize = bytes }
}

// WithCommitRetries sets how often a commit that lost a race to another
// writer is retried (each after reloading the table and looking for the
// batch). Default: 10.
func WithCommitRetries(n int) SinkOption { return func(c *sinkConfig) { c.commitRetries = n } }

// WithTableProperties sets properties of a table the sink creates.
// Default: format-version 2, no catalog-side commit retries.
func WithTableProperties(props map[string]string) SinkOption {
	return func(c *sinkConfig) {
		if c.props == nil {
			c.props = map[string]string{}
		}
		for k, v := range props {
			c.props[k] = v
		}
	}
}

func (c *sinkConfig) validate() error {
	var errs []error
	if c.mode == Update && len(c.keys) == 0 {
		errs = append(errs, errors.New("iceberg: update mode needs WithKeys(the key columns)"))
	}
	if c.mode != Update && len(c.keys) > 0 {
		errs = append(errs, fmt.Errorf("iceberg: WithKeys is for update mode, not %s", c.mode))
	}
	if c.mode < Append || c.mode > Complete {
		errs = append(errs, fmt.Errorf("iceberg: unknown mode %d", int(c.mode)))
	}
	for _, p := range c.partitions {
		switch p.Transform {
		case "identity", "day", "hour":
		case "bucket":
			if p.Buckets < 1 {
				errs = append(errs, fmt.Errorf("iceberg: Bucket(%q, %d): the bucket count must be at least 1", p.Column, p.Buckets))
			}
		default:
			errs = append(errs, fmt.Errorf("iceberg: partition of %q: unknown transform %q (identity, day, hour, bucket)", p.Column, p.Transform))
		}
	}
	if c.commitRetries < 0 {
		errs = append(errs, fmt.Errorf("iceberg: WithCommitRetries(%d): must be ≥ 0", c.commitRetries))
	}
	return errors.Join(errs...)
}
