package iceberg

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/onceflow/onceflow/contract"
	"github.com/onceflow/onceflow/internal/fault"
)

var (
	_ contract.Sink              = (*Sink)(nil)
	_ contract.SinkStarter       = (*Sink)(nil)
	_ contract.SchemaValidator   = (*Sink)(nil)
	_ contract.SinkPosition      = (*Sink)(nil)
	_ contract.GuaranteeReporter = (*Sink)(nil)
	_ contract.Describer         = (*Sink)(nil)
)

// Sink writes each micro-batch of a query into an Iceberg table as one
// snapshot, exactly once in effect (see the package documentation for the
// protocol). AddBatch calls must not overlap; the engine calls them one at
// a time.
type Sink struct {
	cat     *Catalog
	name    string
	cfg     sinkConfig
	queryID string
	skipped atomic.Int64
}

// NewSink returns a sink into the table name ("namespace.table") of cat.
// The table is created at the first batch if it does not exist, from the
// query's schema and WithPartitionSpec.
func NewSink(cat *Catalog, name string, opts ...SinkOption) (*Sink, error) {
	if cat == nil {
		return nil, errors.New("iceberg: NewSink: nil catalog")
	}
	if _, err := parseIdent(name); err != nil {
		return nil, err
	}
	cfg := sinkConfig{commitRetries: 10}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Sink{cat: cat, name: name, cfg: cfg}, nil
}

// Description names the table and the catalog, without credentials.
func (s *Sink) Description() string { return "iceberg[" + s.name + "@" + s.cat.Description() + "]" }

// Guarantee reports exactly-once: a batch already in the branch's history
// is never committed again.
func (s *Sink) Guarantee() contract.Guarantee { return contract.ExactlyOnce }

// Skipped is the number of AddBatch calls that found their batch already
// committed (replays after a crash).
func (s *Sink) Skipped() int64 { return s.skipped.Load() }

// Start records the query id the snapshots are tagged with.
func (s *Sink) Start(_ context.Context, queryID string) error {
	if queryID == "" {
		return errors.New("iceberg: Start: empty query id")
	}
	s.queryID = queryID
	return nil
}

// ValidateSchema refuses a query schema the table cannot take (a diff of
// the differences), a partition or key column the schema lacks, or a type
// Iceberg cannot hold.
func (s *Sink) ValidateSchema(sc *arrow.Schema) error {
	isc, err := icebergSchema(sc)
	if err != nil {
		return err
	}
	for _, p := range s.cfg.partitions {
		if _, ok := isc.FindFieldByName(p.Column); !ok {
			return fmt.Errorf("iceberg: table %s: partition column %q is not in the query's schema %s", s.name, p.Column, sc)
		}
	}
	for _, k := range s.cfg.keys {
		if _, ok := isc.FindFieldByName(k); !ok {
			return fmt.Errorf("iceberg: table %s: key column %q is not in the query's schema %s", s.name, k, sc)
		}
	}
	if _, err := s.spec(isc); err != nil {
		return err
	}
	tbl, err := s.cat.LoadTable(context.Background(), s.name)
	if errors.Is(err, ErrNoTable) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = schemaPlan(s.name, tbl.Schema(), sc)
	return err
}

// LastBatchID is the newest batch of this query the table holds: the
// largest of the table property onceflow.last-batch.<query> and the batch
// ids on the main branch's snapshots of the query.
func (s *Sink) LastBatchID(ctx context.Context) (int64, bool, error) {
	if s.queryID == "" {
		return 0, false, errors.New("iceberg: LastBatchID before Start")
	}
	tbl, err := s.cat.LoadTable(ctx, s.name)
	if errors.Is(err, ErrNoTable) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	id, ok := lastBatch(tbl.Metadata(), s.queryID)
	return id, ok, nil
}

// lastBatch finds the newest batch id of query q in meta.
func lastBatch(meta table.Metadata, q string) (int64, bool) {
	best, ok := int64(-1), false
	if v, has := meta.Properties()[propLastBatchPrefix+q]; has {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			best, ok = n, true
		}
	}
	for _, snap := range mainAncestry(meta) {
		if id, mine := snapshotBatch(snap, q); mine {
			if id > best {
				best, ok = id, true
			}
			break // the newest of the query's snapshots on the branch
		}
	}
	return best, ok
}

// committed reports whether batch id of query q is in meta: the table
// property says so, or a snapshot of the main branch's ancestry carries it.
// The walk stops at the first snapshot of q with a smaller batch id (the
// query commits its batches in order).
func committed(meta table.Metadata, q string, id int64) bool {
	if v, has := meta.Properties()[propLastBatchPrefix+q]; has {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= id {
			return true
		}
	}
	for _, snap := range mainAncestry(meta) {
		if b, mine := snapshotBatch(snap, q); mine {
			if b == id {
				return true
			}
			if b < id {
				return false
			}
		}
	}
	return false
}

// mainAncestry is the main branch's head and its ancestors, newest first.
func mainAncestry(meta table.Metadata) []table.Snapshot {
	head := meta.SnapshotByName(table.MainBranch)
	if head == nil {
		return nil
	}
	return table.AncestorsOf(head.SnapshotID, meta.SnapshotByID)
}

// snapshotBatch reads the batch id of a snapshot written by query q.
func snapshotBatch(snap table.Snapshot, q string) (int64, bool) {
	if snap.Summary == nil || snap.Summary.Properties[PropQueryID] != q {
		return 0, false
	}
	n, err := strconv.ParseInt(snap.Summary.Properties[PropBatchID], 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// AddBatch commits batch batchID's rows as one snapshot, unless the main
// branch already holds the batch.
func (s *Sink) AddBatch(ctx context.Context, batchID int64, sc *arrow.Schema, recs []arrow.RecordBatch) error {
	if s.queryID == "" {
		return errors.New("iceberg: AddBatch before Start (the sink needs the query id)")
	}
	tbl, err := s.loadOrCreate(ctx, sc)
	if err != nil {
		return err
	}
	if committed(tbl.Metadata(), s.queryID, batchID) {
		s.skipped.Add(1)
		return nil
	}
	if tbl, err = s.evolve(ctx, tbl, sc); err != nil {
		return err
	}
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	var files []ice.DataFile
	if rows > 0 {
		files, err = s.writeData(ctx, tbl, batchID, sc, recs)
		if err != nil {
			return err
		}
	}
	fault.Point(fault.IcebergSinkAfterDataFiles)
	var deletes []ice.DataFile
	for attempt := 0; ; attempt++ {
		err := s.commit(ctx, tbl, batchID, sc, recs, files, &deletes)
		if err == nil {
			fault.Point(fault.IcebergSinkAfterCommit)
			return nil
		}
		// The outcome may be unknown (a lost response) or the race lost:
		// either way reload and look before anything is retried, so an
		// accepted commit is never applied twice.
		fresh, lerr := s.cat.LoadTable(ctx, s.name)
		if lerr != nil {
			return errors.Join(s.cat.scrub(fmt.Errorf("iceberg: commit batch %d to %s: %w", batchID, s.name, err)), lerr)
		}
		if committed(fresh.Metadata(), s.queryID, batchID) {
			return nil
		}
		if !retryable(err) || attempt >= s.cfg.commitRetries {
			return s.cat.scrub(fmt.Errorf("iceberg: commit batch %d to %s (attempt %d): %w", batchID, s.name, attempt+1, err))
		}
		tbl = fresh
		if err := sleep(ctx, time.Duration(10<<min(attempt, 6))*time.Millisecond); err != nil {
			return err
		}
	}
}

// catalogError marks an error of the catalog commit itself, as opposed to
// staging the transaction: a lost compare-and-swap (table.ErrCommitFailed),
// an unknown outcome (rest.ErrCommitStateUnknown, a dropped database
// connection, a timeout), anything the reload-and-look settles.
type catalogError struct{ err error }

func (e *catalogError) Error() string { return e.err.Error() }
func (e *catalogError) Unwrap() error { return e.err }

// retryable: the catalog commit failed and the reload just showed the
// batch is not in, so the commit did not take effect and a retry against
// the fresh head cannot apply the batch twice.
func retryable(err error) bool {
	var ce *catalogError
	return errors.As(err, &ce)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// commit stages batch batchID on tbl in one transaction that requires the
// main branch's head to be the one tbl shows, and commits it.
func (s *Sink) commit(ctx context.Context, tbl *table.Table, batchID int64, sc *arrow.Schema, recs []arrow.RecordBatch, files []ice.DataFile, deletes *[]ice.DataFile) error {
	props := ice.Properties{PropQueryID: s.queryID, PropBatchID: strconv.FormatInt(batchID, 10)}
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return err
	}
	if err := tx.SetProperties(ice.Properties{propLastBatchPrefix + s.queryID: strconv.FormatInt(batchID, 10)}); err != nil {
		return err
	}
	switch s.cfg.mode {
	case Append:
		if len(files) > 0 {
			if err := tx.AddDataFiles(ctx, files, props); err != nil {
				return err
			}
		}
	case Update:
		if len(files) > 0 {
			if *deletes == nil {
				ids, err := s.keyFieldIDs(tbl)
				if err != nil {
					return err
				}
				d, err := tx.WriteEqualityDeletes(ctx, ids, retained(recs))
				if err != nil {
					return fmt.Errorf("write equality deletes: %w", err)
				}
				*deletes = d
			}
			rd := tx.NewRowDelta(props).AddRows(files...).AddDeletes(*deletes...)
			if err := rd.Commit(ctx); err != nil {
				return err
			}
		}
	case Complete:
		old, err := liveDataFiles(ctx, tbl)
		if err != nil {
			return err
		}
		switch {
		case len(old) > 0:
			if err := tx.ReplaceDataFilesWithDataFiles(ctx, old, files, props); err != nil {
				return err
			}
		case len(files) > 0:
			if err := tx.AddDataFiles(ctx, files, props); err != nil {
				return err
			}
		}
	}
	fault.Point(fault.IcebergSinkAfterMetadata)
	if _, err := tx.Commit(ctx); err != nil {
		return &catalogError{err}
	}
	return nil
}

// liveDataFiles lists the data files of the main branch's head.
func liveDataFiles(ctx context.Context, tbl *table.Table) ([]ice.DataFile, error) {
	if tbl.CurrentSnapshot() == nil {
		return nil, nil
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the data files of %s: %w", tbl.Identifier(), err)
	}
	out := make([]ice.DataFile, 0, len(tasks))
	for _, t := range tasks {
		if len(t.EqualityDeleteFiles)+len(t.DeleteFiles)+len(t.DeletionVectorFiles) > 0 {
			return nil, errors.New("complete mode over a table with delete files is not supported")
		}
		out = append(out, t.File)
	}
	return out, nil
}

func (s *Sink) keyFieldIDs(tbl *table.Table) ([]int, error) {
	ids := make([]int, 0, len(s.cfg.keys))
	for _, k := range s.cfg.keys {
		f, ok := tbl.Schema().FindFieldByName(k)
		if !ok {
			return nil, fmt.Errorf("iceberg: table %s has no key column %q", s.name, k)
		}
		ids = append(ids, f.ID)
	}
	return ids, nil
}

// writeData writes the batch's rows as Parquet data files named after the
// batch's write id.
func (s *Sink) writeData(ctx context.Context, tbl *table.Table, batchID int64, sc *arrow.Schema, recs []arrow.RecordBatch) ([]ice.DataFile, error) {
	opts := []table.WriteRecordOption{table.WithWriteUUID(WriteID(s.queryID, batchID)), table.WithMaxWriteWorkers(1)}
	if s.cfg.targetFileSize > 0 {
		opts = append(opts, table.WithTargetFileSize(s.cfg.targetFileSize))
	}
	var files []ice.DataFile
	for df, err := range table.WriteRecords(ctx, tbl, sc, retained(recs), opts...) {
		if err != nil {
			return nil, s.cat.scrub(fmt.Errorf("iceberg: write batch %d data files to %s: %w", batchID, s.name, err))
		}
		files = append(files, df)
	}
	slices.SortFunc(files, func(a, b ice.DataFile) int {
		switch {
		case a.FilePath() < b.FilePath():
			return -1
		case a.FilePath() > b.FilePath():
			return 1
		}
		return 0
	})
	return files, nil
}

// retained yields the records, each retained once: iceberg-go releases
// what it consumes, and the engine keeps ownership of its own reference.
func retained(recs []arrow.RecordBatch) iter.Seq2[arrow.RecordBatch, error] {
	return func(yield func(arrow.RecordBatch, error) bool) {
		for _, r := range recs {
			if r.NumRows() == 0 {
				continue
			}
			r.Retain()
			if !yield(r, nil) {
				return
			}
		}
	}
}

// loadOrCreate loads the table, creating it from the query's schema when
// missing.
func (s *Sink) loadOrCreate(ctx context.Context, sc *arrow.Schema) (*table.Table, error) {
	tbl, err := s.cat.LoadTable(ctx, s.name)
	if err == nil || !errors.Is(err, ErrNoTable) {
		return tbl, err
	}
	isc, err := icebergSchema(sc)
	if err != nil {
		return nil, err
	}
	spec, err := s.spec(isc)
	if err != nil {
		return nil, err
	}
	props := ice.Properties{
		"format-version":          "2",
		table.CommitNumRetriesKey: "0",
	}
	if s.cfg.mode == Update {
		props["write.delete.mode"] = "merge-on-read"
		props["write.update.mode"] = "merge-on-read"
	}
	for k, v := range s.cfg.props {
		props[k] = v
	}
	return s.cat.createTable(ctx, s.name, isc, spec, props)
}

// spec builds the partition spec of WithPartitionSpec over isc.
func (s *Sink) spec(isc *ice.Schema) (*ice.PartitionSpec, error) {
	if len(s.cfg.partitions) == 0 {
		return nil, nil
	}
	var popts []ice.PartitionOption
	for _, p := range s.cfg.partitions {
		var tr ice.Transform
		target := p.Column
		switch p.Transform {
		case "identity":
			tr = ice.IdentityTransform{}
		case "day":
			tr, target = ice.DayTransform{}, p.Column+"_day"
		case "hour":
			tr, target = ice.HourTransform{}, p.Column+"_hour"
		case "bucket":
			tr, target = ice.BucketTransform{NumBuckets: p.Buckets}, p.Column+"_bucket"
		}
		popts = append(popts, ice.AddPartitionFieldByName(p.Column, target, tr, isc, nil))
	}
	spec, err := ice.NewPartitionSpecOpts(popts...)
	if err != nil {
		return nil, fmt.Errorf("iceberg: table %s: partition spec: %w", s.name, err)
	}
	return &spec, nil
}

// evolve adds the query's new nullable columns to the table (one commit,
// requiring the schema unchanged) and refuses any other difference.
func (s *Sink) evolve(ctx context.Context, tbl *table.Table, sc *arrow.Schema) (*table.Table, error) {
	add, err := schemaPlan(s.name, tbl.Schema(), sc)
	if err != nil || len(add) == 0 {
		return tbl, err
	}
	tx := tbl.NewTransaction()
	us := tx.UpdateSchema(true, false)
	for _, f := range add {
		us = us.AddColumn([]string{f.Name}, f.Type, f.Doc, false, nil)
	}
	if err := us.Commit(); err != nil {
		return nil, fmt.Errorf("iceberg: table %s: add columns: %w", s.name, err)
	}
	nt, err := tx.Commit(ctx)
	if err != nil {
		// Another writer may have added them; look again.
		fresh, lerr := s.cat.LoadTable(ctx, s.name)
		if lerr != nil {
			return nil, errors.Join(err, lerr)
		}
		if again, perr := schemaPlan(s.name, fresh.Schema(), sc); perr == nil && len(again) == 0 {
			return fresh, nil
		}
		return nil, s.cat.scrub(fmt.Errorf("iceberg: table %s: add columns: %w", s.name, err))
	}
	return nt, nil
}
