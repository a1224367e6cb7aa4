package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"

	"github.com/onceflow/onceflow/contract"
)

var (
	_ contract.Source             = (*Source)(nil)
	_ contract.AvailableNowSource = (*Source)(nil)
	_ contract.SourceIdentifier   = (*Source)(nil)
	_ contract.Describer          = (*Source)(nil)
)

// Source streams the rows appended to an Iceberg table. Its offsets are
// snapshot ids of the main branch, {"snapshot":ID} (0: before the first
// snapshot); batch (start, end] reads the data files added by the append
// snapshots after start up to and including end. Safe for concurrent use.
type Source struct {
	cat    *Catalog
	name   string
	schema *arrow.Schema
	cfg    sourceConfig

	mu    sync.Mutex
	until int64 // AvailableNow cap: 0 none
	capOn bool
}

// SourceOption configures NewSource.
type SourceOption func(*sourceConfig)

type sourceConfig struct {
	latest         bool
	startSnapshot  int64
	skipOverwrites bool
	maxSnapshots   int
}

// WithStartingSnapshot starts the query after snapshot id (its rows are
// not read). Default: the table's first snapshot is read.
func WithStartingSnapshot(id int64) SourceOption {
	return func(c *sourceConfig) { c.startSnapshot = id }
}

// WithStartAtLatest starts the query after the table's current snapshot:
// only rows appended later are read. Default: from the first snapshot.
func WithStartAtLatest() SourceOption { return func(c *sourceConfig) { c.latest = true } }

// WithSkipOverwrites lets the query pass over overwrite and delete
// snapshots, ignoring the rows they add or remove (Spark's
// streaming-skip-overwrite-snapshots and streaming-skip-delete-snapshots).
// Default: such a snapshot stops the query with ErrRewrittenSnapshot.
// Replace snapshots (compaction) never carry new rows and are always
// passed over.
func WithSkipOverwrites() SourceOption { return func(c *sourceConfig) { c.skipOverwrites = true } }

// WithMaxSnapshotsPerTrigger caps how many snapshots one batch reads.
// Default: 0, all available.
func WithMaxSnapshotsPerTrigger(n int) SourceOption {
	return func(c *sourceConfig) { c.maxSnapshots = n }
}

// NewSource returns a source over the table name of cat. Its schema is the
// table's current schema.
func NewSource(ctx context.Context, cat *Catalog, name string, opts ...SourceOption) (*Source, error) {
	var cfg sourceConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.maxSnapshots < 0 {
		return nil, fmt.Errorf("iceberg: WithMaxSnapshotsPerTrigger(%d): must be ≥ 0", cfg.maxSnapshots)
	}
	if cfg.latest && cfg.startSnapshot != 0 {
		return nil, errors.New("iceberg: WithStartAtLatest and WithStartingSnapshot exclude each other")
	}
	tbl, err := cat.LoadTable(ctx, name)
	if err != nil {
		return nil, err
	}
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
	if err != nil {
		return nil, fmt.Errorf("iceberg: table %s: arrow schema: %w", name, err)
	}
	if cfg.startSnapshot != 0 && tbl.SnapshotByID(cfg.startSnapshot) == nil {
		return nil, fmt.Errorf("iceberg: WithStartingSnapshot(%d): table %s has no such snapshot", cfg.startSnapshot, name)
	}
	return &Source{cat: cat, name: name, schema: sc, cfg: cfg}, nil
}

// Schema is the table's schema (when the source was made), as Arrow.
func (s *Source) Schema() *arrow.Schema { return s.schema }

// Description names the table.
func (s *Source) Description() string { return "iceberg[" + s.name + "]" }

// SourceID ties a checkpoint to the catalog and table.
func (s *Source) SourceID() string { return "iceberg:" + s.cat.Description() + "/" + s.name }

type offset struct {
	Snapshot int64 `json:"snapshot"`
}

func encodeOffset(id int64) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"snapshot":%d}`, id))
}

func decodeOffset(raw json.RawMessage) (int64, error) {
	var o offset
	if err := json.Unmarshal(raw, &o); err != nil {
		return 0, fmt.Errorf("iceberg: offset %s: %w", raw, err)
	}
	return o.Snapshot, nil
}

// InitialOffset is 0 (before the first snapshot), the starting snapshot,
// or the current snapshot with WithStartAtLatest.
func (s *Source) InitialOffset(ctx context.Context) (json.RawMessage, error) {
	switch {
	case s.cfg.startSnapshot != 0:
		return encodeOffset(s.cfg.startSnapshot), nil
	case s.cfg.latest:
		tbl, err := s.cat.LoadTable(ctx, s.name)
		if err != nil {
			return nil, err
		}
		if h := tbl.Metadata().SnapshotByName(table.MainBranch); h != nil {
			return encodeOffset(h.SnapshotID), nil
		}
	}
	return encodeOffset(0), nil
}

// PrepareAvailableNow caps later offsets at the current snapshot.
func (s *Source) PrepareAvailableNow(ctx context.Context) error {
	tbl, err := s.cat.LoadTable(ctx, s.name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.capOn, s.until = true, 0
	if h := tbl.Metadata().SnapshotByName(table.MainBranch); h != nil {
		s.until = h.SnapshotID
	}
	return nil
}

// after returns the snapshots after start up to head on the main branch,
// oldest first. A start that no longer exists is a *DataLossError.
func (s *Source) after(meta table.Metadata, start, head int64) ([]table.Snapshot, error) {
	if head == 0 || head == start {
		return nil, nil
	}
	if start != 0 && meta.SnapshotByID(start) == nil {
		return nil, &DataLossError{Table: s.name, Snapshot: start}
	}
	chain, complete := table.AncestorsOfChecked(head, meta.SnapshotByID)
	var out []table.Snapshot
	found := start == 0
	for _, snap := range chain {
		if snap.SnapshotID == start {
			found = true
			break
		}
		out = append(out, snap)
	}
	if !found {
		return nil, fmt.Errorf("iceberg: table %s: snapshot %d is not an ancestor of the main branch's head %d (the branch was rolled back or replaced); the query cannot continue from its checkpoint", s.name, start, head)
	}
	if start == 0 && !complete {
		oldest := chain[len(chain)-1]
		return nil, &DataLossError{Table: s.name, Snapshot: derefOr(oldest.ParentSnapshotID, 0)}
	}
	slices.Reverse(out)
	return out, nil
}

func derefOr(p *int64, d int64) int64 {
	if p == nil {
		return d
	}
	return *p
}

// LatestOffset is the main branch's head (or the AvailableNow cap), moved
// at most WithMaxSnapshotsPerTrigger snapshots past start.
func (s *Source) LatestOffset(ctx context.Context, start json.RawMessage) (json.RawMessage, error) {
	from, err := decodeOffset(start)
	if err != nil {
		return nil, err
	}
	tbl, err := s.cat.LoadTable(ctx, s.name)
	if err != nil {
		return nil, err
	}
	meta := tbl.Metadata()
	var head int64
	if h := meta.SnapshotByName(table.MainBranch); h != nil {
		head = h.SnapshotID
	}
	s.mu.Lock()
	if s.capOn {
		head = s.until
	}
	s.mu.Unlock()
	snaps, err := s.after(meta, from, head)
	if err != nil {
		return nil, err
	}
	if len(snaps) == 0 {
		return start, nil
	}
	if n := s.cfg.maxSnapshots; n > 0 && len(snaps) > n {
		snaps = snaps[:n]
	}
	return encodeOffset(snaps[len(snaps)-1].SnapshotID), nil
}

// Read emits the rows of the data files added by the append snapshots in
// (start, end], snapshot by snapshot, each snapshot's files in path order.
func (s *Source) Read(ctx context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	from, err := decodeOffset(start)
	if err != nil {
		return err
	}
	to, err := decodeOffset(end)
	if err != nil {
		return err
	}
	tbl, err := s.cat.LoadTable(ctx, s.name)
	if err != nil {
		return err
	}
	meta := tbl.Metadata()
	if to != 0 && meta.SnapshotByID(to) == nil {
		return &DataLossError{Table: s.name, Snapshot: to}
	}
	snaps, err := s.after(meta, from, to)
	if err != nil {
		return err
	}
	for _, snap := range snaps {
		op := table.Operation("")
		if snap.Summary != nil {
			op = snap.Summary.Operation
		}
		switch op {
		case table.OpAppend:
		case table.OpReplace:
			continue
		case table.OpOverwrite, table.OpDelete:
			if s.cfg.skipOverwrites {
				continue
			}
			return fmt.Errorf("%w: table %s, snapshot %d is a %q snapshot (rows were rewritten or removed, which a stream of appends cannot express); "+
				"pass iceberg.WithSkipOverwrites() to ignore such snapshots", ErrRewrittenSnapshot, s.name, snap.SnapshotID, op)
		default:
			return fmt.Errorf("iceberg: table %s, snapshot %d: unknown operation %q", s.name, snap.SnapshotID, op)
		}
		if err := s.readSnapshot(ctx, tbl, snap.SnapshotID, emit); err != nil {
			return err
		}
	}
	return nil
}

func (s *Source) readSnapshot(ctx context.Context, tbl *table.Table, id int64, emit func(arrow.RecordBatch) error) error {
	tasks, err := tbl.NewIncrementalAppendScan().FromSnapshotInclusive(id).ToSnapshot(id).PlanFiles(ctx)
	if err != nil {
		return s.cat.scrub(fmt.Errorf("iceberg: table %s: plan the files of snapshot %d: %w", s.name, id, err))
	}
	if len(tasks) == 0 {
		return nil
	}
	slices.SortFunc(tasks, func(a, b table.FileScanTask) int {
		if c := strings.Compare(a.File.FilePath(), b.File.FilePath()); c != 0 {
			return c
		}
		return int(a.Start - b.Start)
	})
	scan := tbl.Scan(table.WithSnapshotID(id))
	defer scan.Close()
	_, recs, err := scan.ReadTasks(ctx, tasks)
	if err != nil {
		return s.cat.scrub(fmt.Errorf("iceberg: table %s: read snapshot %d: %w", s.name, id, err))
	}
	for rec, err := range recs {
		if err != nil {
			return s.cat.scrub(fmt.Errorf("iceberg: table %s: read snapshot %d: %w", s.name, id, err))
		}
		out, cerr := s.conform(rec)
		rec.Release()
		if cerr != nil {
			return cerr
		}
		err = emit(out)
		out.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// conform rebuilds rec under the source's schema (the scan's schema may
// carry field-id metadata or lack a column added later).
func (s *Source) conform(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, len(s.schema.Fields()))
	for i, f := range s.schema.Fields() {
		idx := rec.Schema().FieldIndices(f.Name)
		if len(idx) == 0 {
			nb := array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, int(rec.NumRows()))
			defer nb.Release()
			cols[i] = nb
			continue
		}
		c := rec.Column(idx[0])
		if !arrow.TypeEqual(c.DataType(), f.Type) {
			return nil, fmt.Errorf("iceberg: table %s: column %s reads as %s, the source's schema has %s (the table's schema changed; restart the query)", s.name, f.Name, c.DataType(), f.Type)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(s.schema, cols, rec.NumRows()), nil
}
