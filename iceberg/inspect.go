package iceberg

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
)

// FileInfo describes a file of a table's current snapshot.
type FileInfo struct {
	Path    string
	Rows    int64
	Bytes   int64
	Content string // "data", "equality-deletes", "position-deletes"
}

// LiveFiles lists the data and delete files of the table's current
// snapshot (and its id; 0 for a table without one), in path order.
func LiveFiles(ctx context.Context, cat *Catalog, name string) ([]FileInfo, int64, error) {
	tbl, err := cat.LoadTable(ctx, name)
	if err != nil {
		return nil, 0, err
	}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return nil, 0, nil
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, 0, cat.scrub(fmt.Errorf("iceberg: table %s: plan files: %w", name, err))
	}
	seen := map[string]FileInfo{}
	for _, t := range tasks {
		seen[t.File.FilePath()] = FileInfo{Path: t.File.FilePath(), Rows: t.File.Count(), Bytes: t.File.FileSizeBytes(), Content: "data"}
		for _, d := range t.EqualityDeleteFiles {
			seen[d.FilePath()] = FileInfo{Path: d.FilePath(), Rows: d.Count(), Bytes: d.FileSizeBytes(), Content: "equality-deletes"}
		}
		for _, d := range append(slices.Clone(t.DeleteFiles), t.DeletionVectorFiles...) {
			seen[d.FilePath()] = FileInfo{Path: d.FilePath(), Rows: d.Count(), Bytes: d.FileSizeBytes(), Content: "position-deletes"}
		}
	}
	out := make([]FileInfo, 0, len(seen))
	for _, k := range sortedKeys(seen) {
		out = append(out, seen[k])
	}
	return out, snap.SnapshotID, nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// SnapshotInfo describes one snapshot of the main branch.
type SnapshotInfo struct {
	ID, Parent  int64
	TimestampMs int64
	Operation   string
	Properties  map[string]string // the summary (onceflow.query-id, onceflow.batch-id, added-records, …)
}

// Snapshots lists the main branch's snapshots, oldest first.
func Snapshots(ctx context.Context, cat *Catalog, name string) ([]SnapshotInfo, error) {
	tbl, err := cat.LoadTable(ctx, name)
	if err != nil {
		return nil, err
	}
	chain := mainAncestry(tbl.Metadata())
	out := make([]SnapshotInfo, 0, len(chain))
	for i := len(chain) - 1; i >= 0; i-- {
		s := chain[i]
		si := SnapshotInfo{ID: s.SnapshotID, Parent: derefOr(s.ParentSnapshotID, 0), TimestampMs: s.TimestampMs}
		if s.Summary != nil {
			si.Operation = string(s.Summary.Operation)
			si.Properties = map[string]string(s.Summary.Properties)
		}
		out = append(out, si)
	}
	return out, nil
}

// ReadRows reads the table's current rows through the catalog and calls fn
// once per row with the column names and the row's values (JSON-ready).
func ReadRows(ctx context.Context, cat *Catalog, name string, fn func(columns []string, row []any) error) error {
	tbl, err := cat.LoadTable(ctx, name)
	if err != nil {
		return err
	}
	if tbl.CurrentSnapshot() == nil {
		return nil
	}
	sc, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		return cat.scrub(fmt.Errorf("iceberg: read %s: %w", name, err))
	}
	cols := make([]string, sc.NumFields())
	for i, f := range sc.Fields() {
		cols[i] = f.Name
	}
	for rec, err := range recs {
		if err != nil {
			return cat.scrub(fmt.Errorf("iceberg: read %s: %w", name, err))
		}
		if err := emitRows(rec, cols, fn); err != nil {
			rec.Release()
			return err
		}
		rec.Release()
	}
	return nil
}

func emitRows(rec arrow.RecordBatch, cols []string, fn func([]string, []any) error) error {
	for r := 0; r < int(rec.NumRows()); r++ {
		row := make([]any, rec.NumCols())
		for c := range row {
			row[c] = rec.Column(c).GetOneForMarshal(r)
		}
		if err := fn(cols, row); err != nil {
			return err
		}
	}
	return nil
}
