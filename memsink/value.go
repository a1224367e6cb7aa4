package memsink

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// Value returns row i of a as a Go value (see Rows).
func Value(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch c := a.(type) {
	case *array.Int64:
		return c.Value(i)
	case *array.Int32:
		return int64(c.Value(i))
	case *array.Int16:
		return int64(c.Value(i))
	case *array.Int8:
		return int64(c.Value(i))
	case *array.Uint64:
		return int64(c.Value(i))
	case *array.Uint32:
		return int64(c.Value(i))
	case *array.Float64:
		return c.Value(i)
	case *array.Float32:
		return float64(c.Value(i))
	case *array.String:
		return c.Value(i)
	case *array.LargeString:
		return c.Value(i)
	case *array.Binary:
		return append([]byte(nil), c.Value(i)...)
	case *array.Boolean:
		return c.Value(i)
	case *array.Timestamp:
		unit := c.DataType().(*arrow.TimestampType).Unit
		return c.Value(i).ToTime(unit).UTC()
	default:
		return a.ValueStr(i)
	}
}
