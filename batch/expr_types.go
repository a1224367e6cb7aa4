package batch

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/compute/exec"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"
)

// The types constants take.
var (
	tsMicroUTC = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	durMicro   = &arrow.DurationType{Unit: arrow.Microsecond}
	int64T     = arrow.PrimitiveTypes.Int64
	float64T   = arrow.PrimitiveTypes.Float64
	boolT      = arrow.FixedWidthTypes.Boolean
	utf8T      = arrow.BinaryTypes.String
	nullT      = arrow.Null
)

func withMem(ctx context.Context, mem memory.Allocator) context.Context {
	return exec.WithAllocator(ctx, mem)
}

func litScalar(v any) (scalar.Scalar, error) {
	switch v := v.(type) {
	case nil:
		return scalar.MakeNullScalar(nullT), nil
	case bool:
		return scalar.NewBooleanScalar(v), nil
	case int:
		return scalar.NewInt64Scalar(int64(v)), nil
	case int32:
		return scalar.NewInt32Scalar(v), nil
	case int64:
		return scalar.NewInt64Scalar(v), nil
	case float64:
		return scalar.NewFloat64Scalar(v), nil
	case string:
		return scalar.NewStringScalar(v), nil
	case time.Time:
		return scalar.NewTimestampScalar(arrow.Timestamp(v.UnixMicro()), tsMicroUTC), nil
	case time.Duration:
		return scalar.NewDurationScalar(arrow.Duration(v.Microseconds()), durMicro), nil
	default:
		return nil, fmt.Errorf("unsupported literal type %T", v)
	}
}

func isInt(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

func isFloat(t arrow.DataType) bool {
	return t.ID() == arrow.FLOAT32 || t.ID() == arrow.FLOAT64
}

func isNumeric(t arrow.DataType) bool { return isInt(t) || isFloat(t) }

func isString(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return true
	}
	return false
}

func isNull(t arrow.DataType) bool { return t.ID() == arrow.NULL }

func isTimestamp(t arrow.DataType) bool { return t.ID() == arrow.TIMESTAMP }

func isDuration(t arrow.DataType) bool { return t.ID() == arrow.DURATION }

// utcZone reports whether a timestamp's zone reads as UTC (empty zones are
// taken as UTC throughout this package).
func utcZone(tz string) bool {
	switch tz {
	case "", "UTC", "Etc/UTC", "Z", "+00:00":
		return true
	}
	return false
}

func finer(a, b arrow.TimeUnit) arrow.TimeUnit {
	if a > b {
		return a
	}
	return b
}

func unitOf(t arrow.DataType) arrow.TimeUnit {
	switch t := t.(type) {
	case *arrow.TimestampType:
		return t.Unit
	case *arrow.DurationType:
		return t.Unit
	}
	return arrow.Microsecond
}

// commonTime is the timestamp type two timestamps compare and subtract in:
// the finer unit, and UTC when either has a zone. Zones other than UTC must
// be equal.
func commonTime(a, b *arrow.TimestampType) (*arrow.TimestampType, bool) {
	unit := finer(a.Unit, b.Unit)
	switch {
	case a.TimeZone == b.TimeZone:
		return &arrow.TimestampType{Unit: unit, TimeZone: a.TimeZone}, true
	case utcZone(a.TimeZone) && utcZone(b.TimeZone):
		return &arrow.TimestampType{Unit: unit, TimeZone: "UTC"}, true
	}
	return nil, false
}

// common is the type two operands of a comparison, If or Coalesce meet in,
// or nil when there is none.
func common(a, b arrow.DataType) arrow.DataType {
	switch {
	case isNull(a):
		return b
	case isNull(b):
		return a
	case arrow.TypeEqual(a, b):
		return a
	case isInt(a) && isInt(b):
		return int64T
	case isNumeric(a) && isNumeric(b):
		return float64T
	case isString(a) && isString(b):
		return utf8T
	case isTimestamp(a) && isTimestamp(b):
		t, ok := commonTime(a.(*arrow.TimestampType), b.(*arrow.TimestampType))
		if !ok {
			return nil
		}
		return t
	case isDuration(a) && isDuration(b):
		return &arrow.DurationType{Unit: finer(unitOf(a), unitOf(b))}
	}
	return nil
}

// coerce converts n to type to: constants now, columns with a cast node.
// label names the expression that needs the conversion.
func (b *binder) coerce(n node, to arrow.DataType, label string) (node, error) {
	if arrow.TypeEqual(n.dtype(), to) {
		return n, nil
	}
	if l, ok := n.(*litNode); ok {
		sc, err := b.foldCast(l.sc, to)
		if err != nil {
			return nil, bindErr(ErrConvert, label, fmt.Sprintf("constant %s does not convert to %s: %v", l.sc, to, err))
		}
		return &litNode{sc: sc}, nil
	}
	if !compute.CanCast(n.dtype(), to) {
		return nil, bindErr(ErrType, label, fmt.Sprintf("cannot convert %s to %s", n.dtype(), to))
	}
	return castNode(n, to, label), nil
}

func (b *binder) foldCast(sc scalar.Scalar, to arrow.DataType) (scalar.Scalar, error) {
	if !sc.IsValid() {
		return scalar.MakeNullScalar(to), nil
	}
	d, err := compute.CastDatum(b.ctx, &compute.ScalarDatum{Value: sc}, castOptions(sc.DataType(), to))
	if err != nil {
		return nil, err
	}
	out, ok := d.(*compute.ScalarDatum)
	if !ok {
		d.Release()
		return nil, fmt.Errorf("cast of a constant gave %s", d.Kind())
	}
	return out.Value, nil
}
