package iceberg

import (
	"errors"
	"fmt"
)

// ErrNoTable is returned (wrapped) when a table is not in the catalog.
var ErrNoTable = errors.New("iceberg: no such table")

// ErrSchemaChange is returned (wrapped, in a *SchemaChangeError) when a
// query's output schema differs from the table's in a way the sink does
// not evolve (only adding a nullable column evolves the table).
var ErrSchemaChange = errors.New("iceberg: schema change refused")

// SchemaChangeError lists how the query's schema differs from the table's.
type SchemaChangeError struct {
	Table string
	Diff  []string // one line per difference: "- amount: long (table) → string (query)"
}

func (e *SchemaChangeError) Error() string {
	msg := fmt.Sprintf("iceberg: table %s: the query's schema differs from the table's; only adding a nullable column evolves a table:", e.Table)
	for _, d := range e.Diff {
		msg += "\n  " + d
	}
	return msg + "\n(write to a new table, or change the table with an Iceberg tool first)"
}

func (e *SchemaChangeError) Unwrap() error { return ErrSchemaChange }

// ErrDataLoss is returned (wrapped, in a *DataLossError) when the source's
// recorded snapshot no longer exists: snapshots were expired past it, so
// the data files appended between it and the oldest remaining snapshot
// cannot be read.
var ErrDataLoss = errors.New("iceberg: data loss")

// DataLossError names the table and the snapshot that is gone.
type DataLossError struct {
	Table    string
	Snapshot int64
}

func (e *DataLossError) Error() string {
	return fmt.Sprintf("iceberg: table %s: snapshot %d recorded in the checkpoint no longer exists (expired); "+
		"the rows appended after it cannot all be read. Restart from a new checkpoint (and expire snapshots less eagerly: "+
		"keep them longer than the query can be down)", e.Table, e.Snapshot)
}

func (e *DataLossError) Unwrap() error { return ErrDataLoss }

// ErrRewrittenSnapshot is returned (wrapped) when the source meets an
// overwrite or delete snapshot and WithSkipOverwrites is not set.
var ErrRewrittenSnapshot = errors.New("iceberg: overwrite or delete snapshot in a streamed table")
