package statestore

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/float16"
)

// checkOrder fails unless the encodings of arr's rows compare as the
// values do (nulls first): the key encoding preserves order.
func checkOrder(t *testing.T, arr arrow.Array, cmpRows func(i, j int) int) {
	t.Helper()
	enc := newColEncoder(arr)
	encs := make([][]byte, arr.Len())
	for i := range encs {
		encs[i] = enc(nil, i)
	}
	for i := range encs {
		for j := range encs {
			var want int
			switch {
			case arr.IsNull(i) && arr.IsNull(j):
			case arr.IsNull(i):
				want = -1
			case arr.IsNull(j):
				want = 1
			default:
				want = cmpRows(i, j)
			}
			if got := bytes.Compare(encs[i], encs[j]); got != want {
				t.Fatalf("%s: rows %s and %s compare %d, encodings %x and %x compare %d", arr.DataType(), arr.ValueStr(i), arr.ValueStr(j), want, encs[i], encs[j], got)
			}
		}
	}
}

func floatCmp(a, b float64) int {
	if a == b { // -0 before +0
		return cmp.Compare(boolInt(!math.Signbit(a)), boolInt(!math.Signbit(b)))
	}
	return cmp.Compare(a, b)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestKeyEncodingPreservesOrder(t *testing.T) {
	mem := newMem(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 120
	valid := func(i int) bool { return i%17 != 3 }
	ints := make([]int64, n)
	for i := range ints {
		switch i % 4 {
		case 0:
			ints[i] = rng.Int64()
		case 1:
			ints[i] = -rng.Int64()
		default:
			ints[i] = rng.Int64N(600) - 300
		}
	}
	ints[5], ints[6] = math.MinInt64, math.MaxInt64
	t.Run("signed", func(t *testing.T) {
		for _, dt := range []arrow.DataType{arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64, arrow.FixedWidthTypes.Timestamp_us, arrow.FixedWidthTypes.Date32} {
			b := array.NewBuilder(mem, dt)
			var vals []int64
			for _, v := range ints {
				switch tb := b.(type) {
				case *array.Int8Builder:
					v = int64(int8(v))
					tb.Append(int8(v))
				case *array.Int16Builder:
					v = int64(int16(v))
					tb.Append(int16(v))
				case *array.Int32Builder:
					v = int64(int32(v))
					tb.Append(int32(v))
				case *array.Int64Builder:
					tb.Append(v)
				case *array.TimestampBuilder:
					tb.Append(arrow.Timestamp(v))
				case *array.Date32Builder:
					v = int64(int32(v))
					tb.Append(arrow.Date32(v))
				}
				vals = append(vals, v)
			}
			arr := b.NewArray()
			b.Release()
			sl := array.NewSlice(arr, 2, int64(arr.Len())) // offsets must be honoured
			checkOrder(t, sl, func(i, j int) int { return cmp.Compare(vals[i+2], vals[j+2]) })
			sl.Release()
			arr.Release()
		}
	})
	t.Run("unsigned", func(t *testing.T) {
		b8, b32, b64 := array.NewUint8Builder(mem), array.NewUint32Builder(mem), array.NewUint64Builder(mem)
		for _, v := range ints {
			b8.Append(uint8(v))
			b32.Append(uint32(v))
			b64.Append(uint64(v))
		}
		a8, a32, a64 := b8.NewUint8Array(), b32.NewUint32Array(), b64.NewUint64Array()
		checkOrder(t, a8, func(i, j int) int { return cmp.Compare(a8.Value(i), a8.Value(j)) })
		checkOrder(t, a32, func(i, j int) int { return cmp.Compare(a32.Value(i), a32.Value(j)) })
		checkOrder(t, a64, func(i, j int) int { return cmp.Compare(a64.Value(i), a64.Value(j)) })
		for _, r := range []interface{ Release() }{b8, b32, b64, a8, a32, a64} {
			r.Release()
		}
	})
	t.Run("floats", func(t *testing.T) {
		fs := []float64{math.Inf(-1), math.Inf(1), 0, math.Copysign(0, -1), -1, 1, 1e-300, -1e-300, math.MaxFloat64, -math.MaxFloat64, 65504, -65504, 0.5, -0.5}
		for len(fs) < n {
			fs = append(fs, rng.NormFloat64()*1000)
		}
		b64, b32, b16 := array.NewFloat64Builder(mem), array.NewFloat32Builder(mem), array.NewFloat16Builder(mem)
		for i, f := range fs {
			b64.AppendValues([]float64{f}, []bool{valid(i)})
			b32.Append(float32(f))
			b16.Append(float16.New(float32(f)))
		}
		a64, a32, a16 := b64.NewFloat64Array(), b32.NewFloat32Array(), b16.NewFloat16Array()
		checkOrder(t, a64, func(i, j int) int { return floatCmp(a64.Value(i), a64.Value(j)) })
		checkOrder(t, a32, func(i, j int) int { return floatCmp(float64(a32.Value(i)), float64(a32.Value(j))) })
		checkOrder(t, a16, func(i, j int) int { return floatCmp(float64(a16.Value(i).Float32()), float64(a16.Value(j).Float32())) })
		for _, r := range []interface{ Release() }{b64, b32, b16, a64, a32, a16} {
			r.Release()
		}
	})
	t.Run("decimal128", func(t *testing.T) {
		b := array.NewDecimal128Builder(mem, &arrow.Decimal128Type{Precision: 38, Scale: 2})
		for i, v := range ints {
			d := decimal128.FromI64(v)
			if i%3 == 0 {
				d = decimal128.New(v, rng.Uint64())
			}
			b.Append(d)
		}
		a := b.NewDecimal128Array()
		checkOrder(t, a, func(i, j int) int { return a.Value(i).Cmp(a.Value(j)) })
		a.Release()
		b.Release()
	})
	t.Run("strings", func(t *testing.T) {
		ss := []string{"", "\x00", "\x00\x00", "\x00\x01", "\x01", "a", "a\x00", "a\x00b", "a\x01", "ab", "b", "\xff", "\xff\x00"}
		for len(ss) < n {
			var sb strings.Builder
			for k := rng.IntN(4); k > 0; k-- {
				sb.WriteByte([]byte{0, 1, 'a', 'b', 0xff}[rng.IntN(5)])
			}
			ss = append(ss, sb.String())
		}
		sbd, bbd := array.NewStringBuilder(mem), array.NewBinaryBuilder(mem, arrow.BinaryTypes.LargeBinary)
		for i, s := range ss {
			sbd.AppendValues([]string{s}, []bool{valid(i)})
			bbd.Append([]byte(s))
		}
		sa, ba := sbd.NewStringArray(), bbd.NewLargeBinaryArray()
		checkOrder(t, sa, func(i, j int) int { return strings.Compare(sa.Value(i), sa.Value(j)) })
		checkOrder(t, ba, func(i, j int) int { return bytes.Compare(ba.Value(i), ba.Value(j)) })
		for _, r := range []interface{ Release() }{sbd, bbd, sa, ba} {
			r.Release()
		}
	})
	t.Run("columns", func(t *testing.T) {
		// (string, int64) tuples compare column by column.
		type kv struct {
			s string
			v int64
		}
		var rows []row
		var kvs []kv
		for i := 0; i < n; i++ {
			r := row{user: []string{"", "a", "a\x00", "ab", "b"}[rng.IntN(5)], shard: rng.Int64N(7) - 3}
			rows = append(rows, r)
			kvs = append(kvs, kv{r.user, r.shard})
		}
		rec := buildDeletes(mem, rows)
		defer rec.Release()
		enc := newKeyEncoder(rec, 2)
		for i := range kvs {
			for j := range kvs {
				want := cmp.Or(strings.Compare(kvs[i].s, kvs[j].s), cmp.Compare(kvs[i].v, kvs[j].v))
				if got := bytes.Compare(enc.encode(nil, i), enc.encode(nil, j)); got != want {
					t.Fatalf("%q and %q compare %d, encodings %d", fmt.Sprint(kvs[i]), fmt.Sprint(kvs[j]), want, got)
				}
			}
		}
	})
}
