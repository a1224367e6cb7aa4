package filesink

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"golang.org/x/sync/errgroup"

	"github.com/onceflow/onceflow/contract"
	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

var (
	_ contract.Sink            = (*Sink)(nil)
	_ contract.SinkStarter     = (*Sink)(nil)
	_ contract.SchemaValidator = (*Sink)(nil)
	_ contract.SinkPosition    = (*Sink)(nil)
	_ contract.Describer       = (*Sink)(nil)
)

// Sink writes each batch as Parquet files under a table root and commits
// them through the table's log. It implements contract.Sink, SinkStarter,
// SchemaValidator, SinkPosition and Describer.
type Sink struct {
	table storage.Store
	cfg   config
	log   *offsetlog.Log[Entry]
	codec compress.Codec // shared by every file, so encoders are pooled

	queryID string // from Start, under mu; recorded in every entry

	mu struct {
		sync.Mutex
		st *tableState // nil until loaded, and after a failed batch
	}
}

// New returns a sink writing the table rooted at table (for example
// storage.Sub(store, "lake/payments")).
func New(table storage.Store, opts ...Option) (*Sink, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Sink{table: table, cfg: cfg, log: offsetlog.New[Entry](table, LogDir), codec: cfg.compression.codec()}, nil
}

// Description names the sink for progress and logs.
func (s *Sink) Description() string { return "files[" + s.table.URL() + "]" }

// Start reads the table's log, so a first batch that is already committed
// is recognised, and checks the table's partitioning against the sink's.
//
// A table's batch ids belong to the query that wrote them: a table whose
// newest batch another query wrote is refused, since a new query's batch 0
// would otherwise be taken for the old query's and skipped.
func (s *Sink) Start(ctx context.Context, queryID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(ctx)
	if err != nil {
		return err
	}
	if st.version >= 0 && st.queryID != "" && queryID != "" && st.queryID != queryID {
		return fmt.Errorf("%w: table %s holds batches up to %d of query %s, and this is query %s; a new query (a new checkpoint) must write to a new table, or fork the old checkpoint", ErrOtherQuery, s.table.URL(), st.version, st.queryID, queryID)
	}
	s.queryID = queryID
	return nil
}

// LastBatchID reports the table's version: the newest batch its log holds.
func (s *Sink) LastBatchID(ctx context.Context) (int64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.state(ctx)
	if err != nil {
		return 0, false, err
	}
	return st.version, st.version >= 0, nil
}

// ValidateSchema reports whether the sink can write rows of schema: every
// column of a supported type, every partition column present.
func (s *Sink) ValidateSchema(schema *arrow.Schema) error {
	_, err := newLayout(schema, s.cfg.partitionBy)
	return err
}

// state returns the loaded table state, loading it if needed. s.mu held.
func (s *Sink) state(ctx context.Context) (*tableState, error) {
	if s.mu.st != nil {
		return s.mu.st, nil
	}
	st, err := loadState(ctx, s.table, true)
	if err != nil {
		return nil, fmt.Errorf("filesink: open %s: %w", s.table.URL(), err)
	}
	if st.version >= 0 && !slices.Equal(st.partCols, s.cfg.partitionBy) && !(len(st.partCols) == 0 && len(s.cfg.partitionBy) == 0) {
		return nil, fmt.Errorf("%w: table %s is partitioned by [%s], the sink by [%s]", ErrBadSchema, s.table.URL(), strings.Join(st.partCols, ", "), strings.Join(s.cfg.partitionBy, ", "))
	}
	s.mu.st = st
	return st, nil
}

// isCompaction reports whether the log compacts after batch id.
func (s *Sink) isCompaction(id int64) bool { return (id+1)%s.cfg.compactEvery == 0 }

// AddBatch writes batch batchID's rows and commits them, once: if the log
// already holds batch batchID (or a compact file covering it), it does
// nothing but finish an interrupted compaction.
func (s *Sink) AddBatch(ctx context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) (err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() {
		if err != nil {
			s.mu.st = nil // re-read the log before the next attempt
		}
	}()
	if batchID < 0 {
		return fmt.Errorf("filesink: batch %d: negative batch id", batchID)
	}
	st, err := s.state(ctx)
	if err != nil {
		return err
	}
	if batchID <= st.version {
		if batchID == st.version && s.isCompaction(batchID) && st.compacted < batchID {
			return s.compact(ctx, st)
		}
		return nil
	}
	if st.version >= 0 && batchID > st.version+1 {
		what := fmt.Sprintf("batch %d", st.version+1)
		if batchID > st.version+2 {
			what = fmt.Sprintf("batches %d to %d", st.version+1, batchID-1)
		}
		return fmt.Errorf("filesink: batch %d: %w: the table %s ends at batch %d, so %s would be missing from it; a table takes every batch of its query, in order",
			batchID, ErrMissingBatches, storage.Redact(s.table.URL()), st.version, what)
	}
	l, err := newLayout(schema, s.cfg.partitionBy)
	if err != nil {
		return fmt.Errorf("filesink: batch %d: %w", batchID, err)
	}
	for i, r := range records {
		if !r.Schema().Equal(schema) {
			return fmt.Errorf("filesink: batch %d: %w: record %d has schema %s, the batch %s", batchID, ErrBadSchema, i, r.Schema(), schema)
		}
	}
	groups, err := groupRows(l, records)
	if err != nil {
		return fmt.Errorf("filesink: batch %d: %w", batchID, err)
	}
	now := s.cfg.clock().UnixMilli()
	adds, removes, err := s.writeGroups(ctx, st, l, batchID, now, groups, records)
	if err != nil {
		return fmt.Errorf("filesink: batch %d: %w", batchID, err)
	}
	fault.Point(fault.FileSinkBeforeLog)
	slices.SortFunc(removes, func(a, b Action) int { return strings.Compare(a.Path, b.Path) })
	slices.SortFunc(adds, func(a, b Action) int { return strings.Compare(a.Path, b.Path) })
	entry := &Entry{
		FormatVersion:    FormatVersion,
		Kind:             KindDelta,
		BatchID:          batchID,
		QueryID:          s.queryID,
		CommitTime:       now,
		Schema:           l.logSchema,
		PartitionColumns: append([]string{}, s.cfg.partitionBy...),
		Actions:          append(append(make([]Action, 0, len(adds)+len(removes)), removes...), adds...),
	}
	if err := s.log.Add(ctx, batchID, *entry); err != nil {
		return fmt.Errorf("filesink: commit batch %d: %w", batchID, err)
	}
	if err := st.apply(entry); err != nil {
		return fmt.Errorf("filesink: batch %d: %w", batchID, err)
	}
	fault.Point(fault.FileSinkAfterLog)
	if s.isCompaction(batchID) {
		return s.compact(ctx, st)
	}
	return nil
}

// compact writes the compact file of st's version and purges the log
// objects it makes unnecessary. The content is a function of the log alone
// (retention compares with the version's recorded commit time), so a
// re-run after a crash writes the same bytes.
func (s *Sink) compact(ctx context.Context, st *tableState) error {
	id := st.version
	data, err := st.compactBytes(s.cfg.retention)
	if err != nil {
		return fmt.Errorf("filesink: encode %s: %w", compactName(id), err)
	}
	if err := s.table.Put(ctx, compactName(id), data); err != nil {
		return fmt.Errorf("filesink: write %s: %w", compactName(id), err)
	}
	st.compacted = id
	fault.Point(fault.FileSinkCompaction)
	if err := purgeLog(ctx, s.table, id); err != nil {
		return fmt.Errorf("filesink: %w", err)
	}
	return nil
}

// writeGroups writes every group's files on up to maxOpenFiles workers and
// returns the add and remove actions, in no particular order.
func (s *Sink) writeGroups(ctx context.Context, st *tableState, l *layout, batch, now int64, groups []*group, records []arrow.RecordBatch) (adds, removes []Action, err error) {
	var small map[string][]File
	if s.cfg.minFileSize > 0 {
		if small, err = smallFiles(st, s.cfg.minFileSize); err != nil {
			return nil, nil, err
		}
	}
	results := make([][]Action, len(groups))
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(s.cfg.maxOpenFiles)
	for gi, g := range groups {
		eg.Go(func() error {
			acts, err := s.writeGroup(gctx, l, batch, now, g, records, small[g.dir])
			results[gi] = acts
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, nil, err
	}
	for _, acts := range results {
		for _, a := range acts {
			if a.Action == ActionRemove {
				removes = append(removes, a)
			} else {
				adds = append(adds, a)
			}
		}
	}
	return adds, removes, nil
}

// smallFiles indexes the live files below min bytes by folder.
func smallFiles(st *tableState, min int64) (map[string][]File, error) {
	out := map[string][]File{}
	for _, f := range st.live {
		if f.Size < min {
			dir := path.Dir(f.Path)
			if dir == "." {
				dir = ""
			}
			ff, err := f.full()
			if err != nil {
				return nil, err
			}
			out[dir] = append(out[dir], ff)
		}
	}
	for _, fs := range out {
		slices.SortFunc(fs, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	}
	return out, nil
}

// writeGroup writes one partition's rows of the batch, rolling files at the
// target size, and, when the output is one file below the minimum size,
// merges it with the partition's small committed files.
func (s *Sink) writeGroup(ctx context.Context, l *layout, batch, now int64, g *group, records []arrow.RecordBatch, small []File) ([]Action, error) {
	var acts []Action
	seq := 0
	chunk := s.cfg.chunkRows
	allIdx := make([]int32, chunk)

	var fw *fileWriter
	var pending []byte // the last file, kept back while it may be merged
	var pendingStats []ColumnStats
	var pendingRows int64
	flushPending := func() error {
		if pending == nil {
			return nil
		}
		a, err := s.putFile(ctx, l, batch, now, g, seq, pending, pendingStats, pendingRows)
		if err != nil {
			return err
		}
		acts = append(acts, a)
		seq++
		pending = nil
		fault.Point(fault.FileSinkBetweenFiles)
		return nil
	}
	closeFile := func() error {
		data, stats, err := fw.finish()
		if err != nil {
			return err
		}
		if err := flushPending(); err != nil {
			return err
		}
		pending, pendingStats, pendingRows = data, stats, fw.rows
		fw = nil
		return nil
	}
	for ri, rec := range records {
		var rows []int32
		n := int(rec.NumRows())
		if !g.all {
			rows = g.rows[ri]
			n = len(rows)
		}
		chunk = chunkRows(rec, s.cfg.chunkRows, s.cfg.targetFileSize)
		for off := 0; off < n; {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			end := min(off+chunk, n)
			var idx []int32
			if g.all {
				idx = allIdx[:end-off]
				for j := range idx {
					idx[j] = int32(off + j)
				}
			} else {
				idx = rows[off:end]
			}
			if fw == nil {
				fw = newFileWriter(l, s.codec)
			}
			before := fw.size()
			if err := fw.write(rec, ri, idx); err != nil {
				return nil, err
			}
			off = end
			// Wide rows: a chunk that adds more than an eighth of the
			// target shrinks the next ones, so files stay near the target
			// and memory bounded. The sizes depend on the data alone, so
			// file boundaries stay deterministic.
			if grew := fw.size() - before; grew > s.cfg.targetFileSize/8 && chunk > 1 {
				chunk = max(1, chunk/2)
			}
			if fw.size() >= s.cfg.targetFileSize {
				if err := closeFile(); err != nil {
					return nil, err
				}
			}
		}
	}
	if fw != nil {
		if err := closeFile(); err != nil {
			return nil, err
		}
	}
	if seq == 0 && pending != nil && int64(len(pending)) < s.cfg.minFileSize {
		merged, removes, err := s.merge(ctx, l, g, pending, small)
		if err != nil {
			return nil, err
		}
		if merged != nil {
			pending, pendingStats, pendingRows = merged.data, merged.stats, merged.rows
			for _, f := range removes {
				acts = append(acts, Action{Action: ActionRemove, File: File{Path: f.Path, Size: f.Size, Rows: f.Rows, BatchID: batch, Time: now, Partition: f.Partition}})
			}
		}
	}
	if err := flushPending(); err != nil {
		return nil, err
	}
	return acts, nil
}

type mergedFile struct {
	data  []byte
	stats []ColumnStats
	rows  int64
}

// merge rewrites the partition's small committed files (oldest name first,
// while the total stays within the target size) followed by the new file's
// rows into one file. It returns nil when there is nothing to merge with.
func (s *Sink) merge(ctx context.Context, l *layout, g *group, fresh []byte, small []File) (*mergedFile, []File, error) {
	var take []File
	total := int64(len(fresh))
	for _, f := range small {
		if comparePartitionValues(f.Partition, g.values) != 0 || len(f.Partition) != len(g.values) {
			continue
		}
		if total+f.Size > s.cfg.targetFileSize {
			break
		}
		take = append(take, f)
		total += f.Size
	}
	if len(take) == 0 {
		return nil, nil, nil
	}
	fw := newFileWriter(l, s.codec)
	var copied []File
	for _, f := range take {
		data, err := s.table.Get(ctx, f.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("read %s to merge it: %w", f.Path, err)
		}
		pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, nil, fmt.Errorf("open %s to merge it: %w", f.Path, err)
		}
		if !parquet.EqualNodes(pf.Schema(), l.schema) {
			// The table's schema changed since that file: leave it alone.
			continue
		}
		if err := fw.copyFrom(pf); err != nil {
			return nil, nil, fmt.Errorf("copy %s: %w", f.Path, err)
		}
		copied = append(copied, f)
	}
	if len(copied) == 0 {
		return nil, nil, nil
	}
	pf, err := parquet.OpenFile(bytes.NewReader(fresh), int64(len(fresh)))
	if err != nil {
		return nil, nil, fmt.Errorf("reopen new file: %w", err)
	}
	if err := fw.copyFrom(pf); err != nil {
		return nil, nil, fmt.Errorf("copy new rows: %w", err)
	}
	data, stats, err := fw.finish()
	if err != nil {
		return nil, nil, err
	}
	return &mergedFile{data: data, stats: stats, rows: fw.rows}, copied, nil
}

// putFile stores one finished file under its deterministic name
// (overwriting what an earlier attempt at the batch left) and returns its
// add action.
func (s *Sink) putFile(ctx context.Context, l *layout, batch, now int64, g *group, seq int, data []byte, stats []ColumnStats, rows int64) (Action, error) {
	name := FileName(batch, g.rank, seq, s.cfg.compression)
	if g.dir != "" {
		name = g.dir + "/" + name
	}
	if err := s.table.Put(ctx, name, data); err != nil {
		return Action{}, fmt.Errorf("write %s: %w", name, err)
	}
	all := make([]ColumnStats, 0, len(l.logSchema))
	di := 0
	for _, c := range l.logSchema {
		if pv, ok := partValue(g.values, c.Name); ok {
			cs := ColumnStats{Column: c.Name}
			if pv.Value == nil {
				cs.NullCount = rows
			} else if j := partStatJSON(c.Type, *pv.Value); j != nil {
				cs.Min, cs.Max = j, j
			}
			all = append(all, cs)
			continue
		}
		all = append(all, stats[di])
		di++
	}
	return Action{Action: ActionAdd, File: File{
		Path: name, Size: int64(len(data)), Rows: rows, BatchID: batch, Time: now,
		Partition: g.values, Stats: all,
	}}, nil
}

func partValue(vals []PartitionValue, col string) (PartitionValue, bool) {
	for _, v := range vals {
		if v.Column == col {
			return v, true
		}
	}
	return PartitionValue{}, false
}

// chunkRows is how many rows of rec to convert at a time: at most limit, and
// few enough that a chunk holds about an eighth of the target file size
// (judged by the size of the record's rows in Arrow), so wide rows still
// roll near the target.
func chunkRows(rec arrow.RecordBatch, limit int, target int64) int {
	n := rec.NumRows()
	if n == 0 {
		return limit
	}
	var bytes int64
	for _, c := range rec.Columns() {
		bytes += rowBytes(c.Data())
	}
	perRow := bytes/n + 1
	return int(min(int64(limit), max(1, target/8/perRow)))
}

// rowBytes is the size of d's rows in Arrow buffers. An array that is a
// slice of larger buffers (an aggregation's output split by partition is
// slices of one record) counts its own rows, not the buffers it shares, and
// a validity bitmap counts where the rows hold a null, so the chunks, and
// the file boundaries, depend on the rows alone.
func rowBytes(d arrow.ArrayData) int64 {
	rows, bufs := int64(d.Len()), d.Buffers()
	var n int64
	if d.NullN() > 0 {
		n = (rows + 7) / 8
	}
	switch dt := d.DataType().(type) {
	case arrow.FixedWidthDataType:
		if dt.ID() != arrow.DICTIONARY && dt.ID() != arrow.EXTENSION {
			return n + (rows*int64(dt.BitWidth())+7)/8
		}
	case *arrow.StringType, *arrow.BinaryType:
		if len(bufs) == 3 && bufs[1] != nil {
			if offs := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes()); len(offs) > d.Offset()+d.Len() {
				return n + 4*(rows+1) + int64(offs[d.Offset()+d.Len()]-offs[d.Offset()])
			}
		}
	case *arrow.LargeStringType, *arrow.LargeBinaryType:
		if len(bufs) == 3 && bufs[1] != nil {
			if offs := arrow.Int64Traits.CastFromBytes(bufs[1].Bytes()); len(offs) > d.Offset()+d.Len() {
				return n + 8*(rows+1) + offs[d.Offset()+d.Len()] - offs[d.Offset()]
			}
		}
	}
	n = 0
	for _, b := range bufs {
		if b != nil {
			n += int64(b.Len())
		}
	}
	return n
}
