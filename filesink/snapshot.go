package filesink

import (
	"context"
	"fmt"

	"github.com/onceflow/onceflow/storage"
)

// Snapshot is the table at one committed version: its schema and the files
// the log lists as live then, sorted by path.
type Snapshot struct {
	Version int64 // the batch id; -1 for a table with no commit
	Schema  []Column
	Files   []File
}

// SnapshotAt returns the table as of batch version: the newest compact
// file at or below version and the deltas after it up to version, the way
// a reader of the newest version folds the log. A version below the
// oldest one the log still holds (compaction deletes the deltas up to the
// previous compact file, and the compact files before it) fails with
// ErrVersionGone; a version above the newest commit fails too. The files
// of an old version may have been deleted by Vacuum since: reading them
// fails with a not-exist error from the store.
func SnapshotAt(ctx context.Context, table storage.Store, version int64) (*Snapshot, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		s, err := snapshotOnce(ctx, table, version)
		if err == nil || !storage.IsNotExist(err) {
			return s, err
		}
		lastErr = err // a log object purged between listing and reading
	}
	return nil, fmt.Errorf("filesink: %s: read log at version %d: objects kept disappearing while reading: %w", storage.Redact(table.URL()), version, lastErr)
}

func snapshotOnce(ctx context.Context, table storage.Store, version int64) (*Snapshot, error) {
	where := func(err error) error {
		return fmt.Errorf("filesink: %s: version %d: %w", storage.Redact(table.URL()), version, err)
	}
	ll, err := listLog(ctx, table)
	if err != nil {
		return nil, where(err)
	}
	st := newTableState()
	from := int64(-1)
	for _, c := range ll.compacts {
		if c <= version {
			from = c
		}
	}
	if from >= 0 {
		if err := st.readCompact(ctx, table, from, false); err != nil {
			return nil, where(fmt.Errorf("read %s: %w", compactName(from), err))
		}
	}
	prev := from
	for _, id := range ll.deltas {
		if id <= from || id > version {
			continue
		}
		if prev >= 0 && id != prev+1 {
			return nil, where(missingBatches(table, id, prev))
		}
		prev = id
		e, err := readEntry(ctx, table, deltaName(id))
		if err != nil {
			return nil, where(fmt.Errorf("read %s: %w", deltaName(id), err))
		}
		if err := st.apply(e); err != nil {
			return nil, where(err)
		}
	}
	if st.version != version {
		if version >= 0 && (len(ll.deltas) == 0 || ll.deltas[len(ll.deltas)-1] < version) && (len(ll.compacts) == 0 || ll.compacts[len(ll.compacts)-1] < version) {
			return nil, where(fmt.Errorf("not committed (the newest batch in %s is older)", LogDir))
		}
		return nil, where(fmt.Errorf("%w: compaction purged the log objects that held it (the log folds from %s)", ErrVersionGone, oldestLog(ll)))
	}
	files, err := st.files()
	if err != nil {
		return nil, where(err)
	}
	return &Snapshot{Version: st.version, Schema: st.schema, Files: files}, nil
}

func oldestLog(ll logListing) string {
	switch {
	case len(ll.compacts) > 0:
		return compactName(ll.compacts[0])
	case len(ll.deltas) > 0:
		return deltaName(ll.deltas[0])
	}
	return "nothing"
}

// ReadRows calls fn for every row of the snapshot's files, file by file in
// path order, as the package's ReadRows does for the newest version. A
// file deleted since (by Vacuum, after a later version removed it) fails
// with an error that satisfies storage.IsNotExist.
func (s *Snapshot) ReadRows(ctx context.Context, table storage.Store, fn func(f File, columns []string, row []any) error) error {
	columns := make([]string, len(s.Schema))
	for i, c := range s.Schema {
		columns[i] = c.Name
	}
	for _, f := range s.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := readFile(ctx, table, s.Schema, f, columns, fn); err != nil {
			return fmt.Errorf("filesink: read %s: %w", f.Path, err)
		}
	}
	return nil
}
