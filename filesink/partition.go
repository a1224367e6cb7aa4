package filesink

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// DefaultPartition is the folder value of a null (or empty string)
// partition value, as in Hive and Spark.
const DefaultPartition = "__HIVE_DEFAULT_PARTITION__"

// EscapePartitionValue escapes s for a Hive folder name: the bytes Hive and
// Spark escape (control characters, " # % ' * / : = ? \ DEL { [ ] ^)
// become %XX with upper-case hex.
func EscapePartitionValue(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(c) {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// UnescapePartitionValue reverses EscapePartitionValue; a malformed escape
// is kept as is (as Hive does).
func UnescapePartitionValue(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func needsEscape(c byte) bool {
	if c < 0x20 || c == 0x7F {
		return true
	}
	switch c {
	case '"', '#', '%', '\'', '*', '/', ':', '=', '?', '\\', '{', '[', ']', '^':
		return true
	}
	return false
}

// partitionDir renders the Hive folder of partition values ("" without
// partition columns).
func partitionDir(vals []PartitionValue) string {
	if len(vals) == 0 {
		return ""
	}
	var b strings.Builder
	for i, v := range vals {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(EscapePartitionValue(v.Column))
		b.WriteByte('=')
		if v.Value == nil || *v.Value == "" {
			b.WriteString(DefaultPartition)
		} else {
			b.WriteString(EscapePartitionValue(*v.Value))
		}
	}
	return b.String()
}

const timestampLayout = "2006-01-02 15:04:05.999999"

// renderValue renders row i of a (a partitionable type) as a partition
// value; nil for a null.
func renderValue(a arrow.Array, i int) (*string, error) {
	if a.IsNull(i) {
		return nil, nil
	}
	var s string
	switch c := a.(type) {
	case *array.String:
		s = c.Value(i)
	case *array.LargeString:
		s = c.Value(i)
	case *array.Boolean:
		s = strconv.FormatBool(c.Value(i))
	case *array.Int8:
		s = strconv.FormatInt(int64(c.Value(i)), 10)
	case *array.Int16:
		s = strconv.FormatInt(int64(c.Value(i)), 10)
	case *array.Int32:
		s = strconv.FormatInt(int64(c.Value(i)), 10)
	case *array.Int64:
		s = strconv.FormatInt(c.Value(i), 10)
	case *array.Float32:
		s = strconv.FormatFloat(float64(c.Value(i)), 'g', -1, 32)
	case *array.Float64:
		s = strconv.FormatFloat(c.Value(i), 'g', -1, 64)
	case *array.Date32:
		s = formatDate(int32(c.Value(i)))
	case *array.Timestamp:
		us, err := toMicros(int64(c.Value(i)), c.DataType().(*arrow.TimestampType).Unit)
		if err != nil {
			return nil, err
		}
		s = time.UnixMicro(us).UTC().Format(timestampLayout)
	case *array.Decimal128:
		s = c.Value(i).ToString(c.DataType().(*arrow.Decimal128Type).Scale)
	default:
		return nil, fmt.Errorf("%w: partition column of type %s", ErrUnsupportedType, a.DataType())
	}
	return &s, nil
}

func formatDate(days int32) string {
	return time.Unix(int64(days)*86400, 0).UTC().Format("2006-01-02")
}

// toMicros converts a timestamp of unit u to microseconds, rounding toward
// negative infinity, or fails when it does not fit.
func toMicros(v int64, u arrow.TimeUnit) (int64, error) {
	switch u {
	case arrow.Second:
		if v > math.MaxInt64/1_000_000 || v < math.MinInt64/1_000_000 {
			return 0, fmt.Errorf("%w: timestamp %d s does not fit in int64 microseconds", ErrBadData, v)
		}
		return v * 1e6, nil
	case arrow.Millisecond:
		if v > math.MaxInt64/1_000 || v < math.MinInt64/1_000 {
			return 0, fmt.Errorf("%w: timestamp %d ms does not fit in int64 microseconds", ErrBadData, v)
		}
		return v * 1e3, nil
	case arrow.Nanosecond:
		q := v / 1e3
		if v%1e3 < 0 {
			q--
		}
		return q, nil
	}
	return v, nil
}

// group is the rows of one output partition.
type group struct {
	values []PartitionValue
	dir    string
	rank   int
	rows   [][]int32 // per record: the row indices, in order; nil = none
	all    bool      // no partitioning: every row of every record
	count  int64
}

// groupRows splits the records' rows by partition. Partitions are ranked
// by folder, then by their values, so ranks (and file names) depend only on
// the data.
func groupRows(l *layout, records []arrow.RecordBatch) ([]*group, error) {
	if len(l.partIdx) == 0 {
		g := &group{all: true}
		for _, r := range records {
			g.count += r.NumRows()
		}
		if g.count == 0 {
			return nil, nil
		}
		return []*group{g}, nil
	}
	byRaw := map[string]*group{}
	byValue := map[string]*group{}
	var groups []*group
	var key []byte
	for ri, rec := range records {
		cols := make([]arrow.Array, len(l.partIdx))
		for k, ci := range l.partIdx {
			cols[k] = rec.Column(ci)
		}
		n := int(rec.NumRows())
		for i := 0; i < n; i++ {
			key = key[:0]
			for _, c := range cols {
				key = appendRawKey(key, c, i)
			}
			g, ok := byRaw[string(key)]
			if !ok {
				vals := make([]PartitionValue, len(cols))
				var vk strings.Builder
				for k, c := range cols {
					v, err := renderValue(c, i)
					if err != nil {
						return nil, fmt.Errorf("partition column %q, record %d, row %d: %w", l.arrow.Field(l.partIdx[k]).Name, ri, i, err)
					}
					vals[k] = PartitionValue{Column: l.arrow.Field(l.partIdx[k]).Name, Value: v}
					if v == nil {
						vk.WriteString("\x00N")
					} else {
						vk.WriteString("\x00V")
						vk.WriteString(*v)
					}
				}
				g, ok = byValue[vk.String()]
				if !ok {
					g = &group{values: vals, dir: partitionDir(vals), rows: make([][]int32, len(records))}
					byValue[vk.String()] = g
					groups = append(groups, g)
				}
				byRaw[string(key)] = g
			}
			g.rows[ri] = append(g.rows[ri], int32(i))
			g.count++
		}
	}
	slices.SortFunc(groups, func(a, b *group) int {
		if c := strings.Compare(a.dir, b.dir); c != 0 {
			return c
		}
		return comparePartitionValues(a.values, b.values)
	})
	for i, g := range groups {
		g.rank = i
	}
	return groups, nil
}

func comparePartitionValues(a, b []PartitionValue) int {
	for i := range a {
		av, bv := a[i].Value, b[i].Value
		switch {
		case av == nil && bv == nil:
			continue
		case av == nil:
			return -1
		case bv == nil:
			return 1
		}
		if c := strings.Compare(*av, *bv); c != 0 {
			return c
		}
	}
	return 0
}

// appendRawKey appends an unambiguous encoding of row i of a.
func appendRawKey(key []byte, a arrow.Array, i int) []byte {
	if a.IsNull(i) {
		return append(key, 0)
	}
	key = append(key, 1)
	switch c := a.(type) {
	case *array.String:
		s := c.Value(i)
		key = binary.AppendUvarint(key, uint64(len(s)))
		return append(key, s...)
	case *array.LargeString:
		s := c.Value(i)
		key = binary.AppendUvarint(key, uint64(len(s)))
		return append(key, s...)
	case *array.Boolean:
		if c.Value(i) {
			return append(key, 1)
		}
		return append(key, 0)
	case *array.Int8:
		return append(key, byte(c.Value(i)))
	case *array.Int16:
		return binary.LittleEndian.AppendUint16(key, uint16(c.Value(i)))
	case *array.Int32:
		return binary.LittleEndian.AppendUint32(key, uint32(c.Value(i)))
	case *array.Int64:
		return binary.LittleEndian.AppendUint64(key, uint64(c.Value(i)))
	case *array.Float32:
		return binary.LittleEndian.AppendUint32(key, math.Float32bits(c.Value(i)))
	case *array.Float64:
		return binary.LittleEndian.AppendUint64(key, math.Float64bits(c.Value(i)))
	case *array.Date32:
		return binary.LittleEndian.AppendUint32(key, uint32(c.Value(i)))
	case *array.Timestamp:
		return binary.LittleEndian.AppendUint64(key, uint64(c.Value(i)))
	case *array.Decimal128:
		v := c.Value(i)
		key = binary.LittleEndian.AppendUint64(key, v.LowBits())
		return binary.LittleEndian.AppendUint64(key, uint64(v.HighBits()))
	}
	panic(fmt.Sprintf("filesink: raw key of unchecked type %s", a.DataType()))
}
