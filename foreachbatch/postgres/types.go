package postgres

import (
	"fmt"
	"math/big"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5/pgtype"
)

// pgColumn is a column of the target table as the catalog describes it.
type pgColumn struct {
	name    string
	typname string // pg_type.typname: int4, numeric, timestamptz, …
	display string // format_type(): integer, numeric(10,2), …
	typmod  int32

	notNull    bool
	hasDefault bool // a default, an identity or a generated column
}

// ddlType is the PostgreSQL type WithCreateTables gives an Arrow type, and the
// type the mapping documents.
func ddlType(t arrow.DataType) (string, bool) {
	switch t := t.(type) {
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Uint8Type:
		return "smallint", true
	case *arrow.Int32Type, *arrow.Uint16Type:
		return "integer", true
	case *arrow.Int64Type, *arrow.Uint32Type:
		return "bigint", true
	case *arrow.Uint64Type:
		return "numeric(20,0)", true
	case *arrow.Float32Type, *arrow.Float64Type:
		return "double precision", true
	case *arrow.Decimal128Type:
		return fmt.Sprintf("numeric(%d,%d)", t.Precision, t.Scale), true
	case *arrow.StringType, *arrow.LargeStringType:
		return "text", true
	case *arrow.BooleanType:
		return "boolean", true
	case *arrow.TimestampType:
		return "timestamp with time zone", true
	case *arrow.Date32Type:
		return "date", true
	}
	return "", false
}

// accepts lists the target column types (pg_type.typname) each Arrow type can
// be written to without silent loss: integers only widen, decimals keep their
// scale (checked against the typmod separately).
func accepts(t arrow.DataType, typname string) bool {
	var ok []string
	switch t := t.(type) {
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Uint8Type:
		ok = []string{"int2", "int4", "int8", "numeric"}
	case *arrow.Int32Type, *arrow.Uint16Type:
		ok = []string{"int4", "int8", "numeric"}
	case *arrow.Int64Type, *arrow.Uint32Type:
		ok = []string{"int8", "numeric"}
	case *arrow.Uint64Type:
		ok = []string{"numeric"}
	case *arrow.Float32Type:
		ok = []string{"float4", "float8"}
	case *arrow.Float64Type:
		ok = []string{"float8"}
	case *arrow.Decimal128Type:
		ok = []string{"numeric"}
	case *arrow.StringType, *arrow.LargeStringType:
		ok = []string{"text", "varchar"}
	case *arrow.BooleanType:
		ok = []string{"bool"}
	case *arrow.TimestampType:
		ok = []string{"timestamptz"}
		if t.TimeZone == "" {
			ok = append(ok, "timestamp")
		}
	case *arrow.Date32Type:
		ok = []string{"date"}
	}
	for _, n := range ok {
		if n == typname {
			return true
		}
	}
	return false
}

// unitDigits is the number of fractional second digits of a timestamp unit.
func unitDigits(u arrow.TimeUnit) int {
	switch u {
	case arrow.Second:
		return 0
	case arrow.Millisecond:
		return 3
	case arrow.Microsecond:
		return 6
	}
	return 9
}

// columnDigits is the number of fractional second digits a timestamp column
// keeps: p for timestamp(p), 6 (microseconds) without a precision.
func columnDigits(c pgColumn) int {
	if c.typmod < 0 {
		return 6
	}
	return int(c.typmod)
}

// timestampCut is the step an output timestamp column is truncated to on its
// way into column c (WithTruncateTimestamps), 0 when it keeps every digit.
func timestampCut(t arrow.DataType, c pgColumn) time.Duration {
	ts, ok := t.(*arrow.TimestampType)
	if !ok || unitDigits(ts.Unit) <= columnDigits(c) {
		return 0
	}
	d := time.Duration(1)
	for range 9 - columnDigits(c) {
		d *= 10
	}
	return d
}

func digitsName(n int) string {
	switch n {
	case 0:
		return "seconds"
	case 3:
		return "milliseconds"
	case 6:
		return "microseconds"
	}
	return fmt.Sprintf("%d fractional digits", n)
}

// createdTimestamp is the column WithCreateTables gives a timestamp.
func createdTimestamp() pgColumn {
	return pgColumn{typname: "timestamptz", display: "timestamp with time zone", typmod: -1}
}

// checkColumn tells whether output field f can be written to column c;
// truncate is WithTruncateTimestamps.
func checkColumn(table string, f arrow.Field, c pgColumn, truncate bool) error {
	bad := func(reason string) error {
		return &ColumnError{Table: table, Column: f.Name, ArrowType: f.Type.String(), PGType: c.display, Reason: reason}
	}
	if _, ok := ddlType(f.Type); !ok {
		return bad("onceflow has no PostgreSQL mapping for this Arrow type")
	}
	if !accepts(f.Type, c.typname) {
		switch {
		case numeric(f.Type) && numericPG(c.typname):
			return bad("the column is narrower: values could overflow or lose digits")
		case f.Type.ID() == arrow.TIMESTAMP && c.typname == "timestamp":
			return bad("a timestamp with a time zone needs timestamp with time zone")
		default:
			return bad("incompatible types")
		}
	}
	if ts, ok := f.Type.(*arrow.TimestampType); ok && !truncate {
		if out, in := unitDigits(ts.Unit), columnDigits(c); out > in {
			return bad(fmt.Sprintf("the column keeps %d fractional digits and the output has %d: the last %d would be cut, and keys that differ only there would collide; "+
				"write to a column that keeps them, or allow truncation toward the past to %s with WithTruncateTimestamps", in, out, out-in, digitsName(in)))
		}
	}
	if d, ok := f.Type.(*arrow.Decimal128Type); ok && c.typname == "numeric" && c.typmod >= 4 {
		prec := int32((c.typmod - 4) >> 16 & 0xffff)
		scale := int32((c.typmod - 4) & 0xffff)
		if d.Scale > scale {
			return bad(fmt.Sprintf("scale %d would be rounded to %d", d.Scale, scale))
		}
		if d.Precision-d.Scale > prec-scale {
			return bad(fmt.Sprintf("%d integer digits do not fit in %d", d.Precision-d.Scale, prec-scale))
		}
	}
	return nil
}

// converter returns a function giving row i of a column as a value pgx can
// encode into column c (already checked by checkColumn). Nulls become nil.
// A timestamp with more digits than c keeps is truncated toward the past
// here (see timestampCut), not left to the encoder.
func converter(t arrow.DataType, c pgColumn) func(a arrow.Array, i int) any {
	typname := c.typname
	nullable := func(get func(a arrow.Array, i int) any) func(a arrow.Array, i int) any {
		return func(a arrow.Array, i int) any {
			if a.IsNull(i) {
				return nil
			}
			return get(a, i)
		}
	}
	switch t := t.(type) {
	case *arrow.Int8Type:
		return nullable(func(a arrow.Array, i int) any { return int64(a.(*array.Int8).Value(i)) })
	case *arrow.Int16Type:
		return nullable(func(a arrow.Array, i int) any { return int64(a.(*array.Int16).Value(i)) })
	case *arrow.Int32Type:
		return nullable(func(a arrow.Array, i int) any { return int64(a.(*array.Int32).Value(i)) })
	case *arrow.Int64Type:
		return nullable(func(a arrow.Array, i int) any { return a.(*array.Int64).Value(i) })
	case *arrow.Uint8Type:
		return nullable(func(a arrow.Array, i int) any { return int64(a.(*array.Uint8).Value(i)) })
	case *arrow.Uint16Type:
		return nullable(func(a arrow.Array, i int) any { return int64(a.(*array.Uint16).Value(i)) })
	case *arrow.Uint32Type:
		return nullable(func(a arrow.Array, i int) any { return int64(a.(*array.Uint32).Value(i)) })
	case *arrow.Uint64Type:
		return nullable(func(a arrow.Array, i int) any {
			return pgtype.Numeric{Int: new(big.Int).SetUint64(a.(*array.Uint64).Value(i)), Valid: true}
		})
	case *arrow.Float32Type:
		if typname == "float4" {
			return nullable(func(a arrow.Array, i int) any { return a.(*array.Float32).Value(i) })
		}
		return nullable(func(a arrow.Array, i int) any { return float64(a.(*array.Float32).Value(i)) })
	case *arrow.Float64Type:
		return nullable(func(a arrow.Array, i int) any { return a.(*array.Float64).Value(i) })
	case *arrow.Decimal128Type:
		exp := -t.Scale
		return nullable(func(a arrow.Array, i int) any {
			v := a.(*array.Decimal128).Value(i)
			return pgtype.Numeric{Int: v.BigInt(), Exp: exp, Valid: true}
		})
	case *arrow.StringType:
		return nullable(func(a arrow.Array, i int) any { return a.(*array.String).Value(i) })
	case *arrow.LargeStringType:
		return nullable(func(a arrow.Array, i int) any { return a.(*array.LargeString).Value(i) })
	case *arrow.BooleanType:
		return nullable(func(a arrow.Array, i int) any { return a.(*array.Boolean).Value(i) })
	case *arrow.TimestampType:
		unit := t.Unit
		if cut := timestampCut(t, c); cut > 0 {
			// Truncate rounds down from the zero time, which lies a whole
			// number of seconds from any multiple of cut: a floor.
			return nullable(func(a arrow.Array, i int) any {
				return a.(*array.Timestamp).Value(i).ToTime(unit).UTC().Truncate(cut)
			})
		}
		return nullable(func(a arrow.Array, i int) any {
			return a.(*array.Timestamp).Value(i).ToTime(unit).UTC()
		})
	case *arrow.Date32Type:
		return nullable(func(a arrow.Array, i int) any {
			d := a.(*array.Date32).Value(i)
			return time.Unix(int64(d)*86400, 0).UTC()
		})
	}
	panic(fmt.Sprintf("postgres: no converter for checked type %s", t))
}

func numericPG(typname string) bool {
	switch typname {
	case "int2", "int4", "int8", "numeric", "float4", "float8":
		return true
	}
	return false
}
