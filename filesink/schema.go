package filesink

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"
)

// layout is how one Arrow schema maps onto the table: which columns are
// partition columns and which go into the Parquet files, and how.
type layout struct {
	arrow     *arrow.Schema
	partIdx   []int     // arrow column index of each partition column, in WithPartitionBy order
	data      []dataCol // columns written into files, in schema order
	schema    *parquet.Schema
	logSchema []Column // every column, in schema order, for the log
}

type dataCol struct {
	arrowIdx int
	name     string
	typ      arrow.DataType
	nullable bool
}

// maxDecimalPrecision is the highest decimal128 precision the sink writes
// (as DECIMAL on INT64).
const maxDecimalPrecision = 18

// supportedType returns the log name of an Arrow type the sink can write, or
// ok false.
func supportedType(t arrow.DataType) (string, bool) {
	switch tt := t.(type) {
	case *arrow.BooleanType:
		return "bool", true
	case *arrow.Int8Type:
		return "int8", true
	case *arrow.Int16Type:
		return "int16", true
	case *arrow.Int32Type:
		return "int32", true
	case *arrow.Int64Type:
		return "int64", true
	case *arrow.Float32Type:
		return "float32", true
	case *arrow.Float64Type:
		return "float64", true
	case *arrow.StringType, *arrow.LargeStringType:
		return "string", true
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		return "binary", true
	case *arrow.Date32Type:
		return "date32", true
	case *arrow.TimestampType:
		return "timestamp[us, tz=UTC]", true
	case *arrow.Decimal128Type:
		// Precision above 18 would need FIXED_LEN_BYTE_ARRAY, whose
		// statistics parquet-go orders as unsigned bytes: negative values
		// would get wrong min/max in the footer, and readers that skip row
		// groups by statistics would drop rows.
		if tt.Precision < 1 || tt.Precision > maxDecimalPrecision || tt.Scale < 0 || tt.Scale > tt.Precision {
			return "", false
		}
		return fmt.Sprintf("decimal(%d,%d)", tt.Precision, tt.Scale), true
	}
	return "", false
}

// partitionable reports whether a column of type t can be a partition
// column (its values render as folder names).
func partitionable(t arrow.DataType) bool {
	switch t.(type) {
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		return false
	}
	_, ok := supportedType(t)
	return ok
}

func leafNode(t arrow.DataType) parquet.Node {
	switch tt := t.(type) {
	case *arrow.BooleanType:
		return parquet.Leaf(parquet.BooleanType)
	case *arrow.Int8Type:
		return parquet.Int(8)
	case *arrow.Int16Type:
		return parquet.Int(16)
	case *arrow.Int32Type:
		return parquet.Int(32)
	case *arrow.Int64Type:
		return parquet.Int(64)
	case *arrow.Float32Type:
		return parquet.Leaf(parquet.FloatType)
	case *arrow.Float64Type:
		return parquet.Leaf(parquet.DoubleType)
	case *arrow.StringType, *arrow.LargeStringType:
		return parquet.String()
	case *arrow.BinaryType, *arrow.LargeBinaryType:
		return parquet.Leaf(parquet.ByteArrayType)
	case *arrow.Date32Type:
		return parquet.Date()
	case *arrow.TimestampType:
		return parquet.Timestamp(parquet.Microsecond)
	case *arrow.Decimal128Type:
		p, s := int(tt.Precision), int(tt.Scale)
		if p <= 9 {
			return parquet.Decimal(s, p, parquet.Int32Type)
		}
		return parquet.Decimal(s, p, parquet.Int64Type)
	}
	panic(fmt.Sprintf("filesink: leafNode of unchecked type %s", t))
}

// newLayout checks schema against the partition columns and builds the
// Parquet schema. Every problem is reported, each naming its column.
func newLayout(schema *arrow.Schema, partitionBy []string) (*layout, error) {
	if schema == nil {
		return nil, fmt.Errorf("%w: no schema", ErrBadSchema)
	}
	var errs []error
	l := &layout{arrow: schema}
	seen := map[string]int{}
	for i, f := range schema.Fields() {
		if f.Name == "" {
			errs = append(errs, fmt.Errorf("%w: column %d has an empty name", ErrBadSchema, i))
		}
		if j, dup := seen[f.Name]; dup {
			errs = append(errs, fmt.Errorf("%w: column %q appears twice (columns %d and %d)", ErrBadSchema, f.Name, j, i))
		}
		seen[f.Name] = i
		name, ok := supportedType(f.Type)
		if !ok {
			errs = append(errs, fmt.Errorf("%w: column %q has type %s; the sink writes bool, int8, int16, int32, int64, float32, float64, string, large_string, binary, large_binary, date32, timestamp (any unit) and decimal128 with precision 1-18 and 0 <= scale <= precision", ErrUnsupportedType, f.Name, f.Type))
		}
		l.logSchema = append(l.logSchema, Column{Name: f.Name, Type: name, Nullable: f.Nullable})
	}
	isPart := map[string]bool{}
	for _, p := range partitionBy {
		isPart[p] = true
		i, ok := seen[p]
		if !ok {
			errs = append(errs, fmt.Errorf("%w: partition column %q is not in the schema (columns: %s)", ErrBadSchema, p, columnNames(schema)))
			continue
		}
		if t := schema.Field(i).Type; !partitionable(t) {
			if _, ok := supportedType(t); ok {
				errs = append(errs, fmt.Errorf("%w: partition column %q has type %s, which cannot name a folder", ErrUnsupportedType, p, t))
			}
		}
		l.partIdx = append(l.partIdx, i)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var fields []orderedField
	for i, f := range schema.Fields() {
		if isPart[f.Name] {
			continue
		}
		n := leafNode(f.Type)
		if f.Nullable {
			n = parquet.Optional(n)
		} else {
			n = parquet.Required(n)
		}
		fields = append(fields, orderedField{Node: n, name: f.Name})
		l.data = append(l.data, dataCol{arrowIdx: i, name: f.Name, typ: f.Type, nullable: f.Nullable})
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("%w: every column is a partition column; a Parquet file needs at least one data column", ErrBadSchema)
	}
	l.schema = parquet.NewSchema("onceflow", orderedGroup(fields))
	return l, nil
}

func columnNames(s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// orderedGroup is a Parquet group node that keeps its fields in the order
// given (parquet.Group, a map, sorts them by name), so files keep the
// query's column order.
type orderedGroup []orderedField

type orderedField struct {
	parquet.Node
	name string
}

func (f orderedField) Name() string                           { return f.name }
func (f orderedField) Value(base reflect.Value) reflect.Value { return base.FieldByName(f.name) }

func (g orderedGroup) ID() int                     { return 0 }
func (g orderedGroup) String() string              { return "group" }
func (g orderedGroup) Type() parquet.Type          { return parquet.Group{}.Type() }
func (g orderedGroup) Optional() bool              { return false }
func (g orderedGroup) Repeated() bool              { return false }
func (g orderedGroup) Required() bool              { return true }
func (g orderedGroup) Leaf() bool                  { return false }
func (g orderedGroup) Encoding() encoding.Encoding { return nil }
func (g orderedGroup) Compression() compress.Codec { return nil }
func (g orderedGroup) GoType() reflect.Type        { return reflect.TypeOf(map[string]any{}) }
func (g orderedGroup) Fields() []parquet.Field {
	out := make([]parquet.Field, len(g))
	for i := range g {
		out[i] = g[i]
	}
	return out
}
