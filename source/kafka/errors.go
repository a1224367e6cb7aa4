package kafka

import (
	"errors"
	"fmt"
)

var (
	// ErrDataLoss is wrapped by *DataLossError: records the query must
	// read are gone (retention, DeleteRecords, a deleted topic or
	// partition, a topic deleted and created again) and WithFailOnDataLoss
	// is on.
	ErrDataLoss = errors.New("kafka: data loss")
	// ErrDecode is wrapped by *DecodeError: a record value does not decode
	// and no dead-letter output is configured.
	ErrDecode = errors.New("kafka: value does not decode")
	// ErrBadOffsets is returned for offsets JSON that does not parse.
	ErrBadOffsets = errors.New("kafka: bad offsets")
	// ErrConfig is returned by New for an invalid option set, and for a
	// dead-letter transaction timeout above the brokers' maximum.
	ErrConfig = errors.New("kafka: invalid configuration")
	// ErrFenced is returned by Read when a newer instance with the same
	// dead-letter transactional id has started: this instance produces no
	// more dead letters until OpenCheckpoint is called again (a restart).
	ErrFenced = errors.New("kafka: dead-letter producer fenced by a newer instance")
	// ErrNoTransactionalID is returned when WithDeadLetterTopic is set but the
	// source has no transactional id: neither OpenCheckpoint nor
	// WithDeadLetterTransactionalID gave it one.
	ErrNoTransactionalID = errors.New("kafka: dead-letter topic without a transactional id (run under the engine, which calls OpenCheckpoint, or set WithDeadLetterTransactionalID)")
)

// DataLossError names the partition and the offsets that cannot be read.
// Available is -1 when the topic or partition no longer exists. For a
// topic that was deleted and created again, RecordedTopicID and TopicID
// hold the id recorded in the offsets and the topic's id now (hex), and
// Partition and Expected are -1 when the whole topic is meant (planning).
type DataLossError struct {
	Topic           string
	Partition       int32
	Expected        int64 // the offset the query must read next
	Available       int64 // the first offset the broker still has, -1 if none
	RecordedTopicID string
	TopicID         string
	Reason          string
}

func (e *DataLossError) Error() string {
	if e.RecordedTopicID != "" {
		where := fmt.Sprintf("topic %q", e.Topic)
		if e.Partition >= 0 {
			where += fmt.Sprintf(" partition %d: expected offset %d", e.Partition, e.Expected)
		}
		return fmt.Sprintf("kafka: data loss: %s: the topic was deleted and created again: recorded topic id %s, now %s (%s)",
			where, e.RecordedTopicID, e.TopicID, e.Reason)
	}
	if e.Available < 0 {
		return fmt.Sprintf("kafka: data loss: topic %q partition %d: expected offset %d, available: none (%s)",
			e.Topic, e.Partition, e.Expected, e.Reason)
	}
	return fmt.Sprintf("kafka: data loss: topic %q partition %d: expected offset %d, available from offset %d (%s)",
		e.Topic, e.Partition, e.Expected, e.Available, e.Reason)
}

// Unwrap lets errors.Is(err, ErrDataLoss) match.
func (e *DataLossError) Unwrap() error { return ErrDataLoss }

// DecodeError names the record whose value does not decode.
type DecodeError struct {
	Topic     string
	Partition int32
	Offset    int64
	Field     string // the JSON field at fault, empty for the whole value
	Reason    string
}

func (e *DecodeError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("kafka: decode value: topic %q partition %d offset %d: field %q: %s",
			e.Topic, e.Partition, e.Offset, e.Field, e.Reason)
	}
	return fmt.Sprintf("kafka: decode value: topic %q partition %d offset %d: %s",
		e.Topic, e.Partition, e.Offset, e.Reason)
}

// Unwrap lets errors.Is(err, ErrDecode) match.
func (e *DecodeError) Unwrap() error { return ErrDecode }
