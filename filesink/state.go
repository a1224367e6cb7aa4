package filesink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// tableState is the table at one version: what a reader sees and what the
// sink builds the next batch on.
//
// Each live file and tombstone keeps its action's JSON line, encoded once
// when the action entered the state (or taken verbatim from the compact
// file it was loaded from), so compaction concatenates lines instead of
// re-encoding the whole table every time.
type tableState struct {
	version     int64  // last committed batch; -1 for an empty table
	versionTime int64  // its commit time, Unix ms
	compacted   int64  // newest compact file known to exist; -1 for none
	queryID     string // the query that wrote the newest batch, if recorded
	schema      []Column
	partCols    []string
	live        map[string]stateFile // path → file
	tombstones  map[string]stateFile // removed path → removal (BatchID, Time)
}

type stateFile struct {
	File
	line []byte // the action as one JSON line, without the newline
	// partial: loaded by the fast path, so only Path, Size, Rows, BatchID
	// and Time are set; full decodes the rest from line.
	partial bool
}

// full returns the file with every field, decoding line if needed.
func (f stateFile) full() (File, error) {
	if !f.partial {
		return f.File, nil
	}
	var a Action
	if err := json.Unmarshal(f.line, &a); err != nil {
		return File{}, fmt.Errorf("decode log record of %s: %w", f.Path, err)
	}
	return a.File, nil
}

func newTableState() *tableState {
	return &tableState{version: -1, compacted: -1, live: map[string]stateFile{}, tombstones: map[string]stateFile{}}
}

// applyAction folds one action, whose JSON line is line (nil: encode it).
func (st *tableState) applyAction(a Action, line []byte) error {
	if line == nil {
		var err error
		if line, err = json.Marshal(a); err != nil {
			return fmt.Errorf("encode action for %s: %w", a.Path, err)
		}
	}
	switch a.Action {
	case ActionAdd:
		st.live[a.Path] = stateFile{File: a.File, line: line}
		delete(st.tombstones, a.Path)
	case ActionRemove:
		delete(st.live, a.Path)
		st.tombstones[a.Path] = stateFile{File: a.File, line: line}
	}
	return nil
}

// apply folds one delta entry into the state.
func (st *tableState) apply(e *Entry) error {
	for _, a := range e.Actions {
		if err := st.applyAction(a, nil); err != nil {
			return err
		}
	}
	st.version = e.BatchID
	st.versionTime = e.CommitTime
	if e.QueryID != "" {
		st.queryID = e.QueryID
	}
	if e.Schema != nil {
		st.schema = e.Schema
		st.partCols = e.PartitionColumns
	}
	return nil
}

// files returns the live files sorted by path.
func (st *tableState) files() ([]File, error) {
	out := make([]File, 0, len(st.live))
	for _, f := range st.live {
		ff, err := f.full()
		if err != nil {
			return nil, err
		}
		out = append(out, ff)
	}
	slices.SortFunc(out, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
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
// compaction makes it list again. With lazy, the compact file's records
// are decoded only as far as path, size, rows, batch and time (the sink's
// and Vacuum's needs); stateFile.full decodes the rest on demand.
func loadState(ctx context.Context, table storage.Store, lazy bool) (*tableState, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		st, err := loadStateOnce(ctx, table, lazy)
		// A hole may also be a listing that raced a compaction's purge
		// (a directory read need not show an object created during it):
		// list again before calling it a hole.
		if err == nil || !(storage.IsNotExist(err) || errors.Is(err, ErrMissingBatches)) {
			return st, err
		}
		lastErr = err
	}
	if errors.Is(lastErr, ErrMissingBatches) {
		return nil, lastErr
	}
	return nil, fmt.Errorf("read log: objects kept disappearing while reading: %w", lastErr)
}

// missingBatches is the error for delta id following batch prev in the log
// with the ids between them missing. Compaction never leaves such a hole:
// it deletes only deltas a compact file covers.
func missingBatches(table storage.Store, id, prev int64) error {
	what := fmt.Sprintf("batch %d is", prev+1)
	if id > prev+2 {
		what = fmt.Sprintf("batches %d to %d are", prev+1, id-1)
	}
	return fmt.Errorf("%w: %s/%s follows batch %d, and %s not in the log (a table restored from an incomplete copy?); readers would see the table without them. Restore the missing %s objects, or write the query's output to a new table: %w",
		ErrMissingBatches, storage.Redact(table.URL()), deltaName(id), prev, what, LogDir, offsetlog.ErrCorrupt)
}

func loadStateOnce(ctx context.Context, table storage.Store, lazy bool) (*tableState, error) {
	ll, err := listLog(ctx, table)
	if err != nil {
		return nil, err
	}
	st := newTableState()
	from := int64(-1)
	if n := len(ll.compacts); n > 0 {
		c := ll.compacts[n-1]
		if err := st.readCompact(ctx, table, c, lazy); err != nil {
			return nil, fmt.Errorf("read %s: %w", compactName(c), err)
		}
		from = c
	}
	prev := from // the batch the next delta must follow; -1: any (a fork's table starts at its batch)
	for _, id := range ll.deltas {
		if id <= from {
			continue
		}
		if prev >= 0 && id != prev+1 {
			return nil, missingBatches(table, id, prev)
		}
		prev = id
		e, err := readEntry(ctx, table, deltaName(id))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", deltaName(id), err)
		}
		if e.BatchID != id || e.Kind != KindDelta {
			return nil, &offsetlog.CorruptionError{File: table.URL() + "/" + deltaName(id), Reason: fmt.Sprintf("holds %s entry of batch %d", e.Kind, e.BatchID)}
		}
		if err := st.apply(e); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// compactHeader is the second line of a compact file.
type compactHeader struct {
	FormatVersion    int      `json:"formatVersion"`
	Kind             string   `json:"kind"`
	BatchID          int64    `json:"batchId"`
	QueryID          string   `json:"queryId,omitempty"`
	CommitTime       int64    `json:"commitTime"`
	Schema           []Column `json:"schema"`
	PartitionColumns []string `json:"partitionColumns"`
	Actions          int      `json:"actions"`
}

// compactBytes returns the compact file of the state's version, applying
// retention: live files added more than retention before the version's
// commit time become removes, and removes older than the tombstone
// retention are dropped. It changes st to match what it returns. Its cost
// is sorting the paths and copying the cached lines.
func (st *tableState) compactBytes(retention time.Duration) ([]byte, error) {
	now := st.versionTime
	tomb := DefaultTombstoneRetention
	if retention > 0 && retention < tomb {
		tomb = retention
	}
	if retention > 0 {
		cut := now - retention.Milliseconds()
		for p, f := range st.live {
			if f.Time < cut {
				ff, err := f.full()
				if err != nil {
					return nil, err
				}
				rm := Action{Action: ActionRemove, File: File{Path: p, Size: f.Size, Rows: f.Rows, BatchID: st.version, Time: now, Partition: ff.Partition}}
				if err := st.applyAction(rm, nil); err != nil {
					return nil, err
				}
			}
		}
	}
	tcut := now - tomb.Milliseconds()
	for p, f := range st.tombstones {
		if f.Time < tcut {
			delete(st.tombstones, p)
		}
	}
	type pathLine struct {
		path string
		line []byte
	}
	lines := make([]pathLine, 0, len(st.live)+len(st.tombstones))
	size := 0
	for p, f := range st.live {
		lines = append(lines, pathLine{p, f.line})
		size += len(f.line) + 1
	}
	for p, f := range st.tombstones {
		lines = append(lines, pathLine{p, f.line})
		size += len(f.line) + 1
	}
	slices.SortFunc(lines, func(a, b pathLine) int { return strings.Compare(a.path, b.path) })
	head, err := json.Marshal(compactHeader{
		FormatVersion:    FormatVersion,
		Kind:             KindCompact,
		BatchID:          st.version,
		QueryID:          st.queryID,
		CommitTime:       now,
		Schema:           st.schema,
		PartitionColumns: st.partCols,
		Actions:          len(lines),
	})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(logVersion)+len(head)+2+size)
	out = append(out, logVersion...)
	out = append(out, '\n')
	out = append(out, head...)
	out = append(out, '\n')
	for _, f := range lines {
		out = append(out, f.line...)
		out = append(out, '\n')
	}
	return out, nil
}

// logVersion is the first line of every log object (as offsetlog writes).
const logVersion = "v1"

// readCompact replaces the state with compact file id, decoding its action
// lines on all cores and keeping each line's bytes.
func (st *tableState) readCompact(ctx context.Context, table storage.Store, id int64, lazy bool) error {
	name := compactName(id)
	file := table.URL() + "/" + name
	data, err := table.Get(ctx, name)
	if err != nil {
		return err
	}
	corrupt := func(off int, reason string) error {
		return &offsetlog.CorruptionError{File: file, Offset: off, Reason: reason}
	}
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 || string(data[:nl]) != logVersion {
		return corrupt(0, "first line is not the format version "+logVersion)
	}
	off := nl + 1
	nl = bytes.IndexByte(data[off:], '\n')
	if nl < 0 {
		return corrupt(off, "no header line (torn write?)")
	}
	var h compactHeader
	dec := json.NewDecoder(bytes.NewReader(data[off : off+nl]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return corrupt(off, "header: "+err.Error())
	}
	if h.FormatVersion != FormatVersion || h.Kind != KindCompact || h.BatchID != id {
		return corrupt(off, fmt.Sprintf("header says format %d, kind %q, batch %d", h.FormatVersion, h.Kind, h.BatchID))
	}
	off += nl + 1
	lines := make([][]byte, 0, h.Actions)
	offs := make([]int, 0, h.Actions)
	for off < len(data) {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			return corrupt(off, "last line does not end in a newline (torn write?)")
		}
		lines = append(lines, data[off:off+nl:off+nl])
		offs = append(offs, off)
		off += nl + 1
	}
	if len(lines) != h.Actions {
		return corrupt(off, fmt.Sprintf("%d action lines, header says %d", len(lines), h.Actions))
	}
	actions := make([]Action, len(lines))
	partial := make([]bool, len(lines))
	workers := min(runtime.GOMAXPROCS(0), 1+len(lines)/1000)
	var eg errgroup.Group
	per := (len(lines) + workers - 1) / workers
	for w := 0; w < workers; w++ {
		lo, hi := w*per, min((w+1)*per, len(lines))
		eg.Go(func() error {
			for i := lo; i < hi; i++ {
				if lazy {
					if a, ok := parseRecordPrefix(lines[i]); ok {
						actions[i], partial[i] = a, true
						continue
					}
				}
				if err := json.Unmarshal(lines[i], &actions[i]); err != nil {
					return corrupt(offs[i], err.Error())
				}
				if a := actions[i].Action; a != ActionAdd && a != ActionRemove {
					return corrupt(offs[i], fmt.Sprintf("unknown action %q", a))
				}
			}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return err
	}
	st.live = make(map[string]stateFile, len(lines))
	st.tombstones = map[string]stateFile{}
	for i, a := range actions {
		if err := st.applyAction(a, lines[i]); err != nil {
			return err
		}
		if partial[i] {
			if a.Action == ActionAdd {
				f := st.live[a.Path]
				f.partial = true
				st.live[a.Path] = f
			} else {
				f := st.tombstones[a.Path]
				f.partial = true
				st.tombstones[a.Path] = f
			}
		}
	}
	st.version, st.versionTime, st.compacted = h.BatchID, h.CommitTime, h.BatchID
	st.schema, st.partCols = h.Schema, h.PartitionColumns
	st.queryID = h.QueryID
	return nil
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

// parseRecordPrefix reads the leading fields of an action line as this
// package writes them ({"action":…,"path":…,"size":…,"rows":…,"batchId":…,
// "time":…, …}) without decoding the rest. ok is false for any other
// shape (an escaped path, another field order), which the caller decodes
// in full.
func parseRecordPrefix(line []byte) (a Action, ok bool) {
	if len(line) == 0 || line[len(line)-1] != '}' {
		return a, false
	}
	rest, ok := bytes.CutPrefix(line, []byte(`{"action":"`))
	if !ok {
		return a, false
	}
	switch {
	case bytes.HasPrefix(rest, []byte(ActionAdd+`"`)):
		a.Action, rest = ActionAdd, rest[len(ActionAdd)+1:]
	case bytes.HasPrefix(rest, []byte(ActionRemove+`"`)):
		a.Action, rest = ActionRemove, rest[len(ActionRemove)+1:]
	default:
		return a, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"path":"`)); !ok {
		return a, false
	}
	end := bytes.IndexByte(rest, '"')
	if end <= 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return a, false
	}
	a.Path, rest = string(rest[:end]), rest[end+1:]
	for _, fld := range []struct {
		key string
		dst *int64
	}{{`,"size":`, &a.Size}, {`,"rows":`, &a.Rows}, {`,"batchId":`, &a.BatchID}, {`,"time":`, &a.Time}} {
		if rest, ok = bytes.CutPrefix(rest, []byte(fld.key)); !ok {
			return a, false
		}
		n := 0
		if n < len(rest) && rest[n] == '-' {
			n++
		}
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		v, err := strconv.ParseInt(string(rest[:n]), 10, 64)
		if err != nil {
			return a, false
		}
		*fld.dst, rest = v, rest[n:]
	}
	if len(rest) == 0 || (rest[0] != ',' && rest[0] != '}') {
		return a, false
	}
	return a, true
}
