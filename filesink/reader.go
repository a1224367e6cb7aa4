package filesink

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/parquet-go/parquet-go"

	"github.com/onceflow/onceflow/storage"
)

// Committed returns the files of the table's newest committed version,
// sorted by path: exactly the files the log lists as live, never a file an
// uncommitted or failed attempt left on storage.
func Committed(ctx context.Context, table storage.Store) ([]File, error) {
	st, err := loadState(ctx, table, false)
	if err != nil {
		return nil, fmt.Errorf("filesink: %s: %w", table.URL(), err)
	}
	files, err := st.files()
	if err != nil {
		return nil, fmt.Errorf("filesink: %s: %w", table.URL(), err)
	}
	return files, nil
}

// Version returns the newest committed batch id of the table, or -1 for a
// table with no commit.
func Version(ctx context.Context, table storage.Store) (int64, error) {
	st, err := loadState(ctx, table, true)
	if err != nil {
		return 0, fmt.Errorf("filesink: %s: %w", table.URL(), err)
	}
	return st.version, nil
}

// ReadRows calls fn for every row of the table's newest committed version,
// file by file in path order, rows in file order. columns are the table's
// column names in schema order (partition columns included) and row the
// row's values: nil for null, bool, int8, int16, int32, int64, float32,
// float64, string, []byte (binary), time.Time (timestamps, UTC), and string
// for dates ("2026-11-30") and decimals ("123.45"). fn must not keep row.
func ReadRows(ctx context.Context, table storage.Store, fn func(f File, columns []string, row []any) error) error {
	st, err := loadState(ctx, table, false)
	if err != nil {
		return fmt.Errorf("filesink: %s: %w", table.URL(), err)
	}
	columns := make([]string, len(st.schema))
	for i, c := range st.schema {
		columns[i] = c.Name
	}
	files, err := st.files()
	if err != nil {
		return fmt.Errorf("filesink: %s: %w", table.URL(), err)
	}
	for _, f := range files {
		if err := readFile(ctx, table, st.schema, f, columns, fn); err != nil {
			return fmt.Errorf("filesink: read %s: %w", f.Path, err)
		}
	}
	return nil
}

func readFile(ctx context.Context, table storage.Store, schema []Column, f File, columns []string, fn func(File, []string, []any) error) error {
	data, err := table.Get(ctx, f.Path)
	if err != nil {
		return err
	}
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return err
	}
	// Where each table column comes from: a file column or a partition value.
	src := make([]int, len(schema)) // file column index, or -1
	partVals := make([]any, len(schema))
	fields := pf.Schema().Fields()
	for i, c := range schema {
		src[i] = -1
		if pv, ok := partValue(f.Partition, c.Name); ok {
			if pv.Value != nil {
				v, err := parsePartitionValue(c.Type, *pv.Value)
				if err != nil {
					return fmt.Errorf("partition column %q: %w", c.Name, err)
				}
				partVals[i] = v
			}
			continue
		}
		for j, fl := range fields {
			if fl.Name() == c.Name {
				src[i] = j
			}
		}
		if src[i] < 0 {
			return fmt.Errorf("column %q is not in the file", c.Name)
		}
	}
	row := make([]any, len(schema))
	buf := make([]parquet.Row, 256)
	for _, rg := range pf.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for _, r := range buf[:n] {
				for i, c := range schema {
					if src[i] < 0 {
						row[i] = partVals[i]
						continue
					}
					row[i] = fromValue(c.Type, r[src[i]])
				}
				if err := fn(f, columns, row); err != nil {
					_ = rows.Close()
					return err
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				_ = rows.Close()
				return err
			}
		}
		if err := rows.Close(); err != nil {
			return err
		}
	}
	return nil
}

func decimalScale(typ string) (int32, bool) {
	var p, s int32
	if _, err := fmt.Sscanf(typ, "decimal(%d,%d)", &p, &s); err != nil {
		return 0, false
	}
	return s, true
}

// fromValue converts a Parquet value of a column of log type typ.
func fromValue(typ string, v parquet.Value) any {
	if v.IsNull() {
		return nil
	}
	switch typ {
	case "bool":
		return v.Boolean()
	case "int8":
		return int8(v.Int32())
	case "int16":
		return int16(v.Int32())
	case "int32":
		return v.Int32()
	case "int64":
		return v.Int64()
	case "float32":
		return v.Float()
	case "float64":
		return v.Double()
	case "string":
		return string(v.ByteArray())
	case "binary":
		return slices.Clone(v.ByteArray())
	case "date32":
		return formatDate(v.Int32())
	case "timestamp[us, tz=UTC]":
		return time.UnixMicro(v.Int64()).UTC()
	}
	if scale, ok := decimalScale(typ); ok {
		var n decimal128.Num
		switch v.Kind() {
		case parquet.Int32:
			n = decimal128.FromI64(int64(v.Int32()))
		case parquet.Int64:
			n = decimal128.FromI64(v.Int64())
		default:
			b := v.ByteArray()
			if len(b) != 16 {
				return nil
			}
			n = decimal128.New(int64(binary.BigEndian.Uint64(b[:8])), binary.BigEndian.Uint64(b[8:]))
		}
		return n.ToString(scale)
	}
	return nil
}

// parsePartitionValue turns a partition value back into the Go value
// ReadRows gives for its column type.
func parsePartitionValue(typ, s string) (any, error) {
	switch typ {
	case "string", "date32":
		return s, nil
	case "bool":
		return strconv.ParseBool(s)
	case "int8":
		v, err := strconv.ParseInt(s, 10, 8)
		return int8(v), err
	case "int16":
		v, err := strconv.ParseInt(s, 10, 16)
		return int16(v), err
	case "int32":
		v, err := strconv.ParseInt(s, 10, 32)
		return int32(v), err
	case "int64":
		return strconv.ParseInt(s, 10, 64)
	case "float32":
		v, err := strconv.ParseFloat(s, 32)
		return float32(v), err
	case "float64":
		return strconv.ParseFloat(s, 64)
	case "timestamp[us, tz=UTC]":
		return time.ParseInLocation(timestampLayout, s, time.UTC)
	}
	if strings.HasPrefix(typ, "decimal(") {
		return s, nil
	}
	return nil, fmt.Errorf("type %s cannot be a partition column", typ)
}

// partStatJSON renders a partition value as a stats bound.
func partStatJSON(typ, s string) json.RawMessage {
	v, err := parsePartitionValue(typ, s)
	if err != nil {
		return nil
	}
	if t, ok := v.(time.Time); ok {
		v = t.Format(time.RFC3339Nano)
	}
	if i, ok := v.(int64); ok && (i > 1<<53 || i < -(1<<53)) {
		v = s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// Vacuum deletes the data files of the table that are not part of its
// newest version and are older than olderThan at now: files of failed
// attempts that the log never listed, files a rewrite removed (counted from
// their removal when the log still records it) and files retention
// dropped. Only names of the sink's own pattern (part-….parquet) outside
// _onceflow_log/ are considered; an object of unknown age is kept, and so
// is a file of a batch id above the table's version, whatever its age: a
// crashed attempt's file that the batch's re-run rewrites under the same
// name and may commit while Vacuum runs. olderThan must exceed the longest batch (a batch's files exist before its
// commit) and the longest reader of an older version. With dryRun it only
// lists. It returns the names deleted (or that would be), sorted.
func Vacuum(ctx context.Context, table storage.Store, olderThan time.Duration, now time.Time, dryRun bool) ([]string, error) {
	if olderThan < 0 {
		return nil, fmt.Errorf("%w: vacuum age %s is negative", ErrBadOption, olderThan)
	}
	st, err := loadState(ctx, table, true)
	if err != nil {
		return nil, fmt.Errorf("filesink: vacuum %s: %w", table.URL(), err)
	}
	infos, err := table.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("filesink: vacuum %s: list: %w", table.URL(), err)
	}
	cut := now.Add(-olderThan)
	var out []string
	for _, in := range infos {
		if strings.HasPrefix(in.Name, LogDir+"/") {
			continue
		}
		batch, _, _, ok := ParseFileName(path.Base(in.Name))
		if !ok {
			continue
		}
		if batch > st.version {
			// A batch not committed yet: a crashed attempt's file that
			// the batch's re-run rewrites under the same name and may
			// commit while Vacuum runs. Never touch it.
			continue
		}
		if _, live := st.live[in.Name]; live {
			continue
		}
		if in.ModTime == 0 || !time.Unix(0, in.ModTime).Before(cut) {
			continue
		}
		if t, ok := st.tombstones[in.Name]; ok && !time.UnixMilli(t.Time).Before(cut) {
			continue
		}
		out = append(out, in.Name)
	}
	slices.Sort(out)
	if dryRun || len(out) == 0 {
		return out, nil
	}
	for i := 0; i < len(out); i += 1000 {
		if err := table.Delete(ctx, out[i:min(i+1000, len(out))]...); err != nil {
			return nil, fmt.Errorf("filesink: vacuum %s: delete: %w", table.URL(), err)
		}
	}
	return out, nil
}
