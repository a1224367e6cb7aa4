package engine

import "github.com/onceflow/onceflow/contract"

// The contracts between the engine and its sources and sinks live in
// package contract, which plugins import instead of this one; these
// aliases let a query's code name them through engine. See package
// contract for what each one guarantees.
type (
	// Source is contract.Source: what the engine needs from an input.
	Source = contract.Source
	// SourceCheckpointer is contract.SourceCheckpointer: a source that
	// keeps its own log in the checkpoint.
	SourceCheckpointer = contract.SourceCheckpointer
	// SourceCommitter is contract.SourceCommitter: a source that acts
	// after a batch commits.
	SourceCommitter = contract.SourceCommitter
	// AvailableNowSource is contract.AvailableNowSource: a source that
	// supports the AvailableNow trigger.
	AvailableNowSource = contract.AvailableNowSource
	// SourceIdentifier is contract.SourceIdentifier: a source whose
	// offsets belong to what it reads.
	SourceIdentifier = contract.SourceIdentifier
	// SourceMetrics is contract.SourceMetrics: a source that reports
	// figures for the progress record.
	SourceMetrics = contract.SourceMetrics
	// Describer is contract.Describer: a short description of a source or
	// sink for progress and logs.
	Describer = contract.Describer
	// StaticTable is contract.StaticTable: the static side of a
	// stream-static join, read whole at a version.
	StaticTable = contract.StaticTable
	// StaticSizer is contract.StaticSizer: a static table that tells its
	// size for the plan.
	StaticSizer = contract.StaticSizer

	// Sink is contract.Sink: what the engine needs from an output.
	Sink = contract.Sink
	// SinkStarter is contract.SinkStarter: a sink that prepares before the
	// first batch.
	SinkStarter = contract.SinkStarter
	// GuaranteeReporter is contract.GuaranteeReporter: a sink that tells
	// its delivery guarantee.
	GuaranteeReporter = contract.GuaranteeReporter
	// SchemaValidator is contract.SchemaValidator: a sink that checks the
	// output schema before the first batch.
	SchemaValidator = contract.SchemaValidator
	// SinkPosition is contract.SinkPosition: a sink that knows the newest
	// batch id it applied.
	SinkPosition = contract.SinkPosition
	// SinkHighWater is contract.SinkHighWater: a sink that knows the
	// highest batch id its rows carry.
	SinkHighWater = contract.SinkHighWater

	// Guarantee is contract.Guarantee: a sink's delivery guarantee.
	Guarantee = contract.Guarantee
)

// Delivery guarantees a sink reports through GuaranteeReporter.
const (
	ExactlyOnce = contract.ExactlyOnce
	AtLeastOnce = contract.AtLeastOnce
)

// stringGuaranteeReporter is GuaranteeReporter as it was before
// contract.Guarantee: Guarantee() string. A sink written against it would
// otherwise silently match no reporter and be taken as exactly-once.
type stringGuaranteeReporter interface{ Guarantee() string }

// guarantee is the delivery guarantee s runs under: what it reports, in
// either form, else ExactlyOnce.
func guarantee(s Sink) Guarantee {
	switch g := s.(type) {
	case GuaranteeReporter:
		return g.Guarantee()
	case stringGuaranteeReporter:
		return Guarantee(g.Guarantee())
	}
	return ExactlyOnce
}
