package statictable

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/contract"
	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/storage"
)

var _ contract.StaticTable = (*Lake)(nil)

// Lake is a table written by the files sink, read at a committed batch id.
//
// Its version is {"batch":V,"files":n,"digest":"…"}: V is the newest batch
// id in the table's _onceflow_log when the batch is planned, n and digest
// (SHA-256 of the sorted "path size" lines) pin the files the log lists as
// live at V. ReadVersion folds the log up to V (the newest compact file at
// or below V, then the deltas up to V: filesink.SnapshotAt) and reads
// exactly those files, whatever was appended, compacted or rewritten
// since. Two things end a version, each an error naming the table and the
// version:
//
//   - the files sink compacts its log every WithCompactEvery batches and
//     then deletes the log objects up to the previous compact file, so a
//     version older than the two newest compactions can no longer be
//     folded (ErrVersionGone); the digest also catches a log that folds to
//     other files (a purge cut short);
//   - filesink.Vacuum (onceflow lake vacuum --delete) deletes files that a
//     later version removed (WithMinFileSize rewrites, retention) once
//     they are older than its age: a version listing one of them fails
//     (ErrVersionGone).
//
// A replay reads its version soon after it was planned, so both need a
// query stopped for longer than the table's compaction and vacuum cycle;
// keep the vacuum age above the longest stop after which the query must
// resume.
//
// The table is read whole into memory by the join. Its schema is the
// table's when NewLake runs; a version with another schema fails.
type Lake struct {
	table  storage.Store
	mem    memory.Allocator
	schema *arrow.Schema
	cols   []filesink.Column
}

// Option configures a Lake.
type Option func(*Lake)

// WithAllocator sets the allocator of the records ReadVersion emits;
// default memory.DefaultAllocator.
func WithAllocator(mem memory.Allocator) Option { return func(l *Lake) { l.mem = mem } }

// NewLake returns the files-sink table under table as a static table. The
// table must have a commit: its schema comes from the log.
func NewLake(ctx context.Context, table storage.Store, opts ...Option) (*Lake, error) {
	l := &Lake{table: table, mem: memory.DefaultAllocator}
	for _, o := range opts {
		o(l)
	}
	v, err := filesink.Version(ctx, table)
	if err != nil {
		return nil, err
	}
	if v < 0 {
		return nil, fmt.Errorf("statictable: lake %s has no commit yet, so no schema", storage.Redact(table.URL()))
	}
	snap, err := filesink.SnapshotAt(ctx, table, v)
	if err != nil {
		return nil, err
	}
	fields := make([]arrow.Field, len(snap.Schema))
	for i, c := range snap.Schema {
		t, err := arrowType(c.Type)
		if err != nil {
			return nil, fmt.Errorf("statictable: lake %s: column %q: %w", storage.Redact(table.URL()), c.Name, err)
		}
		fields[i] = arrow.Field{Name: c.Name, Type: t, Nullable: c.Nullable}
	}
	l.schema, l.cols = arrow.NewSchema(fields, nil), snap.Schema
	return l, nil
}

// arrowType is the Arrow type of a column of log type typ, the one the
// files sink wrote it from (string and binary: the non-large ones).
func arrowType(typ string) (arrow.DataType, error) {
	switch typ {
	case "bool":
		return arrow.FixedWidthTypes.Boolean, nil
	case "int8":
		return arrow.PrimitiveTypes.Int8, nil
	case "int16":
		return arrow.PrimitiveTypes.Int16, nil
	case "int32":
		return arrow.PrimitiveTypes.Int32, nil
	case "int64":
		return arrow.PrimitiveTypes.Int64, nil
	case "float32":
		return arrow.PrimitiveTypes.Float32, nil
	case "float64":
		return arrow.PrimitiveTypes.Float64, nil
	case "string":
		return arrow.BinaryTypes.String, nil
	case "binary":
		return arrow.BinaryTypes.Binary, nil
	case "date32":
		return arrow.FixedWidthTypes.Date32, nil
	case "timestamp[us, tz=UTC]":
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, nil
	}
	var p, s int32
	if _, err := fmt.Sscanf(typ, "decimal(%d,%d)", &p, &s); err == nil {
		return &arrow.Decimal128Type{Precision: p, Scale: s}, nil
	}
	return nil, fmt.Errorf("log type %q has no Arrow type here", typ)
}

// Schema implements contract.StaticTable.
func (l *Lake) Schema() *arrow.Schema { return l.schema }

// Description implements contract.StaticTable: lake[<table URL>].
func (l *Lake) Description() string { return "lake[" + storage.Redact(l.table.URL()) + "]" }

// lakeVersion is a Lake's version JSON.
type lakeVersion struct {
	Batch  int64  `json:"batch"`
	Files  int    `json:"files"`
	Digest string `json:"digest"`
}

func digestFiles(fs []filesink.File) string {
	h := sha256.New()
	for _, f := range fs { // sorted by path
		fmt.Fprintf(h, "%s %d\n", f.Path, f.Size)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// LatestVersion implements contract.StaticTable: the newest batch id of
// the table's log and its files' digest.
func (l *Lake) LatestVersion(ctx context.Context) (json.RawMessage, error) {
	// Version then SnapshotAt: a commit between them only makes the
	// version one batch older than the newest.
	v, err := filesink.Version(ctx, l.table)
	if err != nil {
		return nil, err
	}
	snap, err := filesink.SnapshotAt(ctx, l.table, v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(lakeVersion{Batch: v, Files: len(snap.Files), Digest: digestFiles(snap.Files)})
}

// ReadVersion implements contract.StaticTable: the rows of the files the
// log lists at the version's batch, file by file in path order.
func (l *Lake) ReadVersion(ctx context.Context, version json.RawMessage, emit func(arrow.RecordBatch) error) error {
	var v lakeVersion
	if err := json.Unmarshal(version, &v); err != nil || v.Digest == "" {
		return fmt.Errorf("%w: %s is not a version of %s", ErrBadVersion, version, l.Description())
	}
	where := fmt.Sprintf("%s at batch %d", l.Description(), v.Batch)
	snap, err := filesink.SnapshotAt(ctx, l.table, v.Batch)
	if errors.Is(err, filesink.ErrVersionGone) {
		return fmt.Errorf("%w: %s: the log no longer holds the version (compacted and purged since): %w", ErrVersionGone, where, err)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if d := digestFiles(snap.Files); len(snap.Files) != v.Files || d != v.Digest {
		return fmt.Errorf("%w: %s: the log lists %d files (digest %s) at the batch, the version recorded %d (digest %s)", ErrVersionChanged, where, len(snap.Files), d, v.Files, v.Digest)
	}
	if len(snap.Schema) != len(l.cols) {
		return fmt.Errorf("%w: %s: the table's schema changed to %v", ErrVersionChanged, where, snap.Schema)
	}
	for i, c := range snap.Schema {
		if c != l.cols[i] {
			return fmt.Errorf("%w: %s: the table's schema changed to %v", ErrVersionChanged, where, snap.Schema)
		}
	}
	b := array.NewRecordBuilder(l.mem, l.schema)
	defer b.Release()
	rows := 0
	flush := func() error {
		if rows == 0 {
			return nil
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		rows = 0
		return emit(rec)
	}
	err = snap.ReadRows(ctx, l.table, func(f filesink.File, _ []string, row []any) error {
		for i, val := range row {
			if err := appendValue(b.Field(i), val); err != nil {
				return fmt.Errorf("column %q: %w", l.cols[i].Name, err)
			}
		}
		if rows++; rows >= batchRows {
			return flush()
		}
		return nil
	})
	if storage.IsNotExist(err) {
		return fmt.Errorf("%w: %s: a file the version lists was deleted (filesink.Vacuum after a later batch removed it?): %w", ErrVersionGone, where, err)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return flush()
}

// batchRows is the most rows of one emitted record.
const batchRows = 64 << 10

// appendValue appends a value as filesink's ReadRows gives it.
func appendValue(b array.Builder, v any) error {
	if v == nil {
		b.AppendNull()
		return nil
	}
	bad := func() error { return fmt.Errorf("value %v (%T) for a %s column", v, v, b.Type()) }
	switch b := b.(type) {
	case *array.BooleanBuilder:
		x, ok := v.(bool)
		if !ok {
			return bad()
		}
		b.Append(x)
	case *array.Int8Builder:
		x, ok := v.(int8)
		if !ok {
			return bad()
		}
		b.Append(x)
	case *array.Int16Builder:
		x, ok := v.(int16)
		if !ok {
			return bad()
		}
		b.Append(x)
	case *array.Int32Builder:
		x, ok := v.(int32)
		if !ok {
			return bad()
		}
		b.Append(x)
	case *array.Int64Builder:
		x, ok := v.(int64)
		if !ok {
			return bad()
		}
		b.Append(x)
	case *array.Float32Builder:
		x, ok := v.(float32)
		if !ok {
			return bad()
		}
		b.Append(x)
	case *array.Float64Builder:
		x, ok := v.(float64)
		if !ok {
			return bad()
		}
		b.Append(x)
	case *array.StringBuilder:
		x, ok := v.(string)
		if !ok {
			return bad()
		}
		b.Append(x)
	case *array.BinaryBuilder:
		x, ok := v.([]byte)
		if !ok {
			return bad()
		}
		b.Append(x)
	case *array.Date32Builder:
		x, ok := v.(string)
		if !ok {
			return bad()
		}
		t, err := time.Parse(time.DateOnly, x)
		if err != nil {
			return bad()
		}
		b.Append(arrow.Date32FromTime(t))
	case *array.TimestampBuilder:
		x, ok := v.(time.Time)
		if !ok {
			return bad()
		}
		b.Append(arrow.Timestamp(x.UnixMicro()))
	case *array.Decimal128Builder:
		x, ok := v.(string)
		if !ok {
			return bad()
		}
		dt := b.Type().(*arrow.Decimal128Type)
		n, err := decimal128.FromString(x, dt.Precision, dt.Scale)
		if err != nil {
			return bad()
		}
		b.Append(n)
	default:
		return bad()
	}
	return nil
}

var _ contract.StaticSizer = (*Lake)(nil)

// StaticSize implements contract.StaticSizer from the log: the newest
// version's files, rows and stored bytes.
func (l *Lake) StaticSize(ctx context.Context) (files int, rows, bytes int64, err error) {
	v, err := filesink.Version(ctx, l.table)
	if err != nil {
		return 0, 0, 0, err
	}
	snap, err := filesink.SnapshotAt(ctx, l.table, v)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, f := range snap.Files {
		rows += f.Rows
		bytes += f.Size
	}
	return len(snap.Files), rows, bytes, nil
}
