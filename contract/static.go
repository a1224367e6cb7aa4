package contract

import (
	"context"
	"encoding/json"

	"github.com/apache/arrow-go/v18/arrow"
)

// StaticTable is the static side of a stream-static join: a table read
// whole at a version, such as a lake table at a commit or a directory of
// files at a listing. Versions are the table's own JSON, encoded
// deterministically like source offsets: the engine records the version
// each batch joins against in offsets/N, and a re-run of the batch reads
// that version again, so it joins exactly what the first attempt joined.
type StaticTable interface {
	Schema() *arrow.Schema
	Description() string
	// LatestVersion is the newest version of the table.
	LatestVersion(ctx context.Context) (json.RawMessage, error)
	// ReadVersion emits every row of the table at version, in a
	// deterministic order; a version it can no longer read fails with an
	// error that names it.
	ReadVersion(ctx context.Context, version json.RawMessage, emit func(arrow.RecordBatch) error) error
}

// StaticSizer is a StaticTable that tells the size of its newest version
// from its listing or log, without reading the rows; the plan
// (Query.Describe) shows it as the size of the broadcast side.
type StaticSizer interface {
	// StaticSize returns the newest version's files, rows (-1 when only
	// reading them would tell) and stored bytes.
	StaticSize(ctx context.Context) (files int, rows, bytes int64, err error)
}
