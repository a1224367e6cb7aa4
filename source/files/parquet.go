package files

import (
	"errors"
	"fmt"
	"io"
	"math"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// pqColumn says how one leaf column of a Parquet file feeds a declared
// column.
type pqColumn struct {
	col  int            // declared column index
	unit arrow.TimeUnit // timestamp: the file's unit
}

// readParquet reads a Parquet file whose columns are matched to the
// declared ones by name. Undeclared file columns are ignored; a declared
// nullable column the file lacks is null. Row numbers (1-based, across row
// groups) stand in for line numbers.
func (r *readRun) readParquet(path string, in io.ReaderAt, size int64) error {
	pf, err := parquet.OpenFile(in, size)
	if err != nil {
		return r.bad(path, 0, &badValue{reason: "not a readable Parquet file: " + err.Error()}, nil)
	}
	schema := pf.Schema()
	leaves := make([]pqColumn, len(schema.Columns()))
	for i := range leaves {
		leaves[i].col = -1
	}
	for i := range r.s.cols {
		col := &r.s.cols[i]
		leaf, ok := schema.Lookup(col.name)
		if !ok {
			if col.nullable {
				continue
			}
			return r.bad(path, 0, &badValue{col.name, "missing from the file (the column is not nullable)"}, nil)
		}
		if leaf.MaxRepetitionLevel > 0 {
			return r.bad(path, 0, &badValue{col.name, "is repeated in the file; only flat columns are read"}, nil)
		}
		unit, ok := parquetFits(leaf.Node.Type(), col)
		if !ok {
			return r.bad(path, 0, &badValue{col.name, fmt.Sprintf("the file has %s, declared %s", describe(leaf.Node.Type()), col.what)}, nil)
		}
		leaves[leaf.ColumnIndex] = pqColumn{col: i, unit: unit}
	}
	cells := r.cells
	rows := make([]parquet.Row, 512)
	rowNo := 0
	for _, rg := range pf.RowGroups() {
		rr := rg.Rows()
		for {
			n, err := rr.ReadRows(rows)
			for _, row := range rows[:n] {
				rowNo++
				if bv := r.parquetRow(row, leaves, cells); bv != nil {
					if err := r.bad(path, rowNo, bv, nil); err != nil {
						rr.Close()
						return err
					}
					continue
				}
				if err := r.row(cells); err != nil {
					rr.Close()
					return err
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rr.Close()
				return r.bad(path, rowNo+1, &badValue{reason: "read: " + err.Error() + " (rest of the file skipped)"}, nil)
			}
		}
		if err := rr.Close(); err != nil {
			return fmt.Errorf("files: read %s: %w", path, err)
		}
	}
	return nil
}

func (r *readRun) parquetRow(row parquet.Row, leaves []pqColumn, cells []cell) *badValue {
	for k := range cells {
		cells[k].set = false
	}
	for _, v := range row {
		ci := v.Column()
		if ci < 0 || ci >= len(leaves) || leaves[ci].col < 0 {
			continue
		}
		col, c := &r.s.cols[leaves[ci].col], &cells[leaves[ci].col]
		if v.IsNull() {
			if !col.nullable {
				return &badValue{col.name, "null (the column is not nullable)"}
			}
			c.set, c.null = true, true
			continue
		}
		c.set, c.null = true, false
		switch col.kind {
		case kindInt:
			x := v.Int64()
			if v.Kind() == parquet.Int32 {
				x = int64(v.Int32())
			}
			if col.bits < 64 && (x < -1<<(col.bits-1) || x >= 1<<(col.bits-1)) {
				return &badValue{col.name, fmt.Sprintf("%d is out of range for %s", x, col.what)}
			}
			c.i = x
		case kindUint:
			x := v.Uint64()
			if v.Kind() == parquet.Int32 {
				x = uint64(v.Uint32())
			}
			if col.bits < 64 && x >= 1<<col.bits {
				return &badValue{col.name, fmt.Sprintf("%d is out of range for %s", x, col.what)}
			}
			c.u = x
		case kindFloat:
			if v.Kind() == parquet.Float {
				c.f = float64(v.Float())
			} else {
				c.f = v.Double()
			}
			if col.bits == 32 && !math.IsInf(c.f, 0) && math.Abs(c.f) > math.MaxFloat32 {
				return &badValue{col.name, fmt.Sprintf("%g is out of range for %s", c.f, col.what)}
			}
		case kindString:
			c.s = v.ByteArray()
			if !utf8.Valid(c.s) {
				return &badValue{col.name, "string is not valid UTF-8"}
			}
		case kindBool:
			c.i = 0
			if v.Boolean() {
				c.i = 1
			}
		case kindTimestamp:
			x, ok := convertUnit(v.Int64(), leaves[ci].unit, col.unit)
			if !ok {
				return &badValue{col.name, fmt.Sprintf("%d %s is out of range for a %s timestamp", v.Int64(), leaves[ci].unit, col.unit)}
			}
			c.i = x
		case kindDate:
			c.i = int64(v.Int32())
		}
	}
	for k := range cells {
		if !cells[k].set {
			cells[k].set, cells[k].null = true, true // nullable: checked at open
		}
	}
	return nil
}

// parquetFits reports whether a file column of type t can be read into
// col, and for timestamps the file's unit.
func parquetFits(t parquet.Type, col *column) (arrow.TimeUnit, bool) {
	var lt format.LogicalTypeValue
	if l := t.LogicalType(); l != nil {
		lt = l.Value
	}
	switch col.kind {
	case kindInt:
		switch t.Kind() {
		case parquet.Int64:
			return 0, col.bits == 64 && !isUnsigned(lt)
		case parquet.Int32:
			return 0, !isUnsigned(lt) && !isDate(lt)
		}
	case kindUint:
		switch t.Kind() {
		case parquet.Int64:
			return 0, col.bits == 64 && isUnsigned(lt)
		case parquet.Int32:
			return 0, isUnsigned(lt)
		}
	case kindFloat:
		return 0, t.Kind() == parquet.Double || t.Kind() == parquet.Float
	case kindString:
		_, isString := lt.(*format.StringType)
		return 0, t.Kind() == parquet.ByteArray && (lt == nil || isString)
	case kindBool:
		return 0, t.Kind() == parquet.Boolean
	case kindTimestamp:
		ts, ok := lt.(*format.TimestampType)
		if !ok || t.Kind() != parquet.Int64 {
			return 0, false
		}
		switch ts.Unit.Value.(type) {
		case *format.MilliSeconds:
			return arrow.Millisecond, true
		case *format.MicroSeconds:
			return arrow.Microsecond, true
		case *format.NanoSeconds:
			return arrow.Nanosecond, true
		}
	case kindDate:
		return 0, t.Kind() == parquet.Int32 && isDate(lt)
	}
	return 0, false
}

func isUnsigned(lt format.LogicalTypeValue) bool {
	it, ok := lt.(*format.IntType)
	return ok && !it.IsSigned
}

func isDate(lt format.LogicalTypeValue) bool {
	_, ok := lt.(*format.DateType)
	return ok
}

func describe(t parquet.Type) string {
	if l := t.LogicalType(); l != nil && l.Value != nil {
		return fmt.Sprintf("%s (%s)", t.Kind(), l)
	}
	return t.Kind().String()
}
