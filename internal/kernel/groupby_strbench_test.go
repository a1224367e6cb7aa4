package kernel

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The settlement aggregation of bench/ groups by the rate source's key
// column: "k-" + decimal(offset % keys), 100k keys, rows in offset order,
// split over 8 state partitions (12.5k groups each).
// BenchmarkGroupByRateKeys runs the kernel over such keys (in that order,
// and shuffled) and BenchmarkGoMapStringBaseline does the same work with a
// plain Go map[string] in the same process, so the two compare as a ratio:
//
//	go test -run '^$' -bench 'GroupByRateKeys|GoMapStringBaseline' ./batch/

// benchRateInput is benchRows rows of (key string, amount int64) in records
// of benchBatch rows; order "rate" cycles through the keys like the rate
// source, "random" draws them uniformly.
func benchRateInput(b *testing.B, order string, groups int) *benchData {
	id := fmt.Sprintf("rate-%s/%d", order, groups)
	if d, ok := benchCache.Load(id); ok {
		return d.(*benchData)
	}
	ints := benchInput(b, "int64", groups) // uniform keys k*7919, values
	mem := memory.NewGoAllocator()
	d := &benchData{keys: make([]int64, benchRows), values: ints.values}
	for i := range d.keys {
		if order == "rate" {
			d.keys[i] = int64(i % groups)
		} else {
			d.keys[i] = ints.keys[i] / 7919
		}
	}
	var key []byte
	for start := 0; start < benchRows; start += benchBatch {
		end := min(start+benchBatch, benchRows)
		sb := array.NewStringBuilder(mem)
		for _, k := range d.keys[start:end] {
			key = strconv.AppendInt(append(key[:0], "k-"...), k, 10)
			sb.BinaryBuilder.Append(key)
		}
		kc := sb.NewArray()
		sb.Release()
		vb := array.NewInt64Builder(mem)
		vb.AppendValues(d.values[start:end], nil)
		vc := vb.NewArray()
		vb.Release()
		d.recs = append(d.recs, gbRecord([]string{"merchant", "amount"}, kc, vc))
	}
	benchCache.Store(id, d)
	return d
}

// BenchmarkGroupByRateKeys is sum+count over the rate source's string keys.
func BenchmarkGroupByRateKeys(b *testing.B) {
	for _, groups := range []int{1000, 12_500, 100_000} {
		for _, order := range []string{"rate", "random"} {
			d := benchRateInput(b, order, groups)
			b.Run(fmt.Sprintf("groups=%d/order=%s", groups, order), func(b *testing.B) { benchGroupBy(b, d, groups) })
		}
	}
}

// BenchmarkGoMapStringBaseline does what BenchmarkGroupByRateKeys does with
// a map[string] over the same Arrow string columns (the lookup converts
// without allocating; a new key is copied, as the kernel copies it).
func BenchmarkGoMapStringBaseline(b *testing.B) {
	type acc struct{ sum, count int64 }
	for _, groups := range []int{1000, 12_500, 100_000} {
		for _, order := range []string{"rate", "random"} {
			d := benchRateInput(b, order, groups)
			b.Run(fmt.Sprintf("groups=%d/order=%s", groups, order), func(b *testing.B) {
				cpu0 := benchCPU()
				for range b.N {
					m := map[string]*acc{}
					for _, rec := range d.recs {
						keys := rec.Column(0).(*array.String)
						vals := rec.Column(1).(*array.Int64).Int64Values()
						for i, v := range vals {
							k := keys.Value(i)
							a := m[k]
							if a == nil {
								a = &acc{}
								m[strings.Clone(k)] = a
							}
							a.sum += v
							a.count++
						}
					}
					if len(m) != groups {
						b.Fatal(len(m))
					}
				}
				benchReport(b, benchRows, cpu0)
			})
		}
	}
}
