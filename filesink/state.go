package filesink

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// tableState is the table at one version: what a reader sees and what the
// sink builds the next batch on.
type tableState struct {
	version     int64 // last committed batch; -1 for an empty table
	versionTime int64 // its commit time, Unix ms
	compacted   int64 // newest compact file known to exist; -1 for none
	schema      []Column
	partCols    []string
	live        map[string]File // path → file
	tombstones  map[string]File // removed path → removal (BatchID, Time)
}

func newTableState() *tableState {
	return &tableState{version: -1, compacted: -1, live: map[string]File{}, tombstones: map[string]File{}}
}

// apply folds one log entry into the state.
func (st *tableState) apply(e *Entry) {
	if e.Kind == KindCompact {
		st.live = make(map[string]File, len(e.Actions))
		st.tombstones = map[string]File{}
		st.compacted = e.BatchID
	}
	for _, a := range e.Actions {
		switch a.Action {
		case ActionAdd:
			st.live[a.Path] = a.File
			delete(st.tombstones, a.Path)
		case ActionRemove:
			delete(st.live, a.Path)
			st.tombstones[a.Path] = a.File
		}
	}
	st.version = e.BatchID
	st.versionTime = e.CommitTime
	if e.Schema != nil {
		st.schema = e.Schema
		st.partCols = e.PartitionColumns
	}
}

// files returns the live files sorted by path.
func (st *tableState) files() []File {
	out := make([]File, 0, len(st.live))
	for _, f := range st.live {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// logListing is the log folder's objects.
type logListing struct {
	deltas   []int64 // ascending
	compacts []int64 // ascending
}

func listLog(ctx context.Context, table storage.Store) (logListing, error) {
	infos, err := table.List(ctx, LogDir+"/")
	if err != nil {
		return logListing{}, fmt.Errorf("list %s: %w", LogDir, err)
	}
	var ll logListing
	for _, in := range infos {
		id, compact, ok := parseLogName(in.Name)
		switch {
		case !ok:
		case compact:
			ll.compacts = append(ll.compacts, id)
		default:
			ll.deltas = append(ll.deltas, id)
		}
	}
	slices.Sort(ll.deltas)
	slices.Sort(ll.compacts)
	return ll, nil
}

func readEntry(ctx context.Context, table storage.Store, name string) (*Entry, error) {
	data, err := table.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	var e Entry
	if err := offsetlog.Decode(table.URL()+"/"+name, data, &e); err != nil {
		return nil, err
	}
	if e.FormatVersion != FormatVersion {
		return nil, &offsetlog.CorruptionError{File: table.URL() + "/" + name, Reason: fmt.Sprintf("filesink log format version %d is not supported by this build (it reads %d)", e.FormatVersion, FormatVersion)}
	}
	return &e, nil
}

// loadState reads the table's newest version: the newest compact file and
// the deltas after it. A log object deleted under it by a concurrent
// compaction makes it list again.
func loadState(ctx context.Context, table storage.Store) (*tableState, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		st, err := loadStateOnce(ctx, table)
		if err == nil || !storage.IsNotExist(err) {
			return st, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("read log: objects kept disappearing while reading: %w", lastErr)
}

func loadStateOnce(ctx context.Context, table storage.Store) (*tableState, error) {
	ll, err := listLog(ctx, table)
	if err != nil {
		return nil, err
	}
	st := newTableState()
	from := int64(-1)
	if n := len(ll.compacts); n > 0 {
		c := ll.compacts[n-1]
		e, err := readEntry(ctx, table, compactName(c))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", compactName(c), err)
		}
		st.apply(e)
		from = c
	}
	for _, id := range ll.deltas {
		if id <= from {
			continue
		}
		e, err := readEntry(ctx, table, deltaName(id))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", deltaName(id), err)
		}
		if e.BatchID != id || e.Kind != KindDelta {
			return nil, &offsetlog.CorruptionError{File: table.URL() + "/" + deltaName(id), Reason: fmt.Sprintf("holds %s entry of batch %d", e.Kind, e.BatchID)}
		}
		st.apply(e)
	}
	return st, nil
}

// compactEntry builds the compact entry of the state's version, applying
// retention: live files added more than retention before the version's
// commit time become removes, and removes older than the tombstone
// retention are dropped. It changes st to match what it returns.
func (st *tableState) compactEntry(retention time.Duration) *Entry {
	now := st.versionTime
	tomb := DefaultTombstoneRetention
	if retention > 0 && retention < tomb {
		tomb = retention
	}
	if retention > 0 {
		cut := now - retention.Milliseconds()
		for p, f := range st.live {
			if f.Time < cut {
				delete(st.live, p)
				st.tombstones[p] = File{Path: p, Size: f.Size, Rows: f.Rows, BatchID: st.version, Time: now, Partition: f.Partition}
			}
		}
	}
	tcut := now - tomb.Milliseconds()
	for p, f := range st.tombstones {
		if f.Time < tcut {
			delete(st.tombstones, p)
		}
	}
	actions := make([]Action, 0, len(st.live)+len(st.tombstones))
	for _, f := range st.live {
		actions = append(actions, Action{Action: ActionAdd, File: f})
	}
	for _, f := range st.tombstones {
		actions = append(actions, Action{Action: ActionRemove, File: f})
	}
	slices.SortFunc(actions, func(a, b Action) int { return strings.Compare(a.Path, b.Path) })
	return &Entry{
		FormatVersion:    FormatVersion,
		Kind:             KindCompact,
		BatchID:          st.version,
		CommitTime:       now,
		Schema:           st.schema,
		PartitionColumns: st.partCols,
		Actions:          actions,
	}
}

// purgeLog deletes the log objects a reader no longer needs once compact
// file id exists: deltas up to the previous compact file and compact files
// before it. The previous generation is kept so a reader that listed the
// folder before compact id appeared can still finish.
func purgeLog(ctx context.Context, table storage.Store, id int64) error {
	ll, err := listLog(ctx, table)
	if err != nil {
		return err
	}
	prev := int64(-1)
	for _, c := range ll.compacts {
		if c < id {
			prev = c
		}
	}
	if prev < 0 {
		return nil
	}
	var names []string
	for _, c := range ll.compacts {
		if c < prev {
			names = append(names, compactName(c))
		}
	}
	for _, d := range ll.deltas {
		if d <= prev {
			names = append(names, deltaName(d))
		}
	}
	if len(names) == 0 {
		return nil
	}
	if err := table.Delete(ctx, names...); err != nil {
		return fmt.Errorf("purge log before %s: %w", compactName(prev), err)
	}
	return nil
}
