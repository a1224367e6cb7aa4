package kernel

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The benchmarks aggregate benchRows rows, in records of benchBatch rows,
// with keys drawn uniformly from a number of distinct values, and report
// rows/s (wall clock) and rows/cpu-s (process CPU time, steadier on a
// shared machine). Run: go test -bench . -run '^$' ./batch/

const (
	benchRows  = 10_000_000
	benchBatch = 1 << 16
)

type benchData struct {
	recs   []arrow.RecordBatch
	keys   []int64 // the key column, for the Go map baseline
	values []int64
}

// benchCPU is the CPU time of the process so far.
func benchCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchReport reports rows/s and rows/cpu-s of b.N runs over rows rows that
// started at CPU time cpu0.
func benchReport(b *testing.B, rows int, cpu0 time.Duration) {
	total := float64(rows) * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds(), "rows/s")
	if cpu := (benchCPU() - cpu0).Seconds(); cpu > 0 {
		b.ReportMetric(total/cpu, "rows/cpu-s")
	}
}

var benchCache sync.Map // "kind/groups" -> *benchData, built once per process

func benchInput(b *testing.B, kind string, groups int) *benchData {
	id := fmt.Sprintf("%s/%d", kind, groups)
	if d, ok := benchCache.Load(id); ok {
		return d.(*benchData)
	}
	rng := rand.New(rand.NewPCG(7, uint64(groups)))
	mem := memory.NewGoAllocator()
	d := &benchData{keys: make([]int64, benchRows), values: make([]int64, benchRows)}
	for i := range d.keys {
		d.keys[i] = int64(rng.IntN(groups)) * 7919
		d.values[i] = int64(rng.IntN(10000))
	}
	names := make([]string, 0)
	if kind == "string" {
		names = make([]string, groups)
		for i := range names {
			names[i] = fmt.Sprintf("merchant-%08d", i*7919)
		}
	}
	for start := 0; start < benchRows; start += benchBatch {
		end := min(start+benchBatch, benchRows)
		var kc arrow.Array
		if kind == "string" {
			sb := array.NewStringBuilder(mem)
			for _, k := range d.keys[start:end] {
				sb.Append(names[k/7919])
			}
			kc = sb.NewArray()
			sb.Release()
		} else {
			kb := array.NewInt64Builder(mem)
			kb.AppendValues(d.keys[start:end], nil)
			kc = kb.NewArray()
			kb.Release()
		}
		vb := array.NewInt64Builder(mem)
		vb.AppendValues(d.values[start:end], nil)
		vc := vb.NewArray()
		vb.Release()
		d.recs = append(d.recs, gbRecord([]string{"merchant", "amount"}, kc, vc))
	}
	benchCache.Store(id, d)
	return d
}

func benchGroupBy(b *testing.B, d *benchData, groups int) {
	mem := memory.NewGoAllocator()
	b.ResetTimer()
	cpu0 := benchCPU()
	for range b.N {
		g, err := NewGroupBy(mem, d.recs[0].Schema(), []string{"merchant"}, []Agg{sumOf("amount"), countOf("*")})
		if err != nil {
			b.Fatal(err)
		}
		for _, rec := range d.recs {
			if err := g.Merge(rec); err != nil {
				b.Fatal(err)
			}
		}
		if g.Len() > groups {
			b.Fatalf("%d groups", g.Len())
		}
		g.Release()
	}
	benchReport(b, benchRows, cpu0)
}

// BenchmarkGroupByInt64 is sum+count over an int64 key.
func BenchmarkGroupByInt64(b *testing.B) {
	for _, groups := range []int{12_500, 100_000, 10_000_000} {
		d := benchInput(b, "int64", groups)
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) { benchGroupBy(b, d, groups) })
	}
}

// BenchmarkGroupByString is sum+count over a string key ("merchant-%08d").
func BenchmarkGroupByString(b *testing.B) {
	for _, groups := range []int{100_000} {
		d := benchInput(b, "string", groups)
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) { benchGroupBy(b, d, groups) })
	}
}

// BenchmarkGoMapBaseline does what BenchmarkGroupByInt64 does with a plain
// Go map over the same keys and values.
func BenchmarkGoMapBaseline(b *testing.B) {
	type acc struct{ sum, count int64 }
	for _, groups := range []int{12_500, 100_000, 10_000_000} {
		d := benchInput(b, "int64", groups)
		b.Run(fmt.Sprintf("groups=%d", groups), func(b *testing.B) {
			cpu0 := benchCPU()
			for range b.N {
				m := map[int64]acc{}
				for i, k := range d.keys {
					a := m[k]
					a.sum += d.values[i]
					a.count++
					m[k] = a
				}
				if len(m) > groups {
					b.Fatal(len(m))
				}
			}
			benchReport(b, benchRows, cpu0)
		})
	}
}

// BenchmarkPartition splits the int64-key records into 8 partitions.
func BenchmarkPartition(b *testing.B) {
	d := benchInput(b, "int64", 100_000)
	mem := memory.NewGoAllocator()
	b.ResetTimer()
	cpu0 := benchCPU()
	for range b.N {
		for _, rec := range d.recs {
			parts, err := Partition(mem, rec, []int{0}, 8)
			if err != nil {
				b.Fatal(err)
			}
			for _, p := range parts {
				if p != nil {
					p.Release()
				}
			}
		}
	}
	benchReport(b, benchRows, cpu0)
}

// BenchmarkPartitionShared is BenchmarkPartition with one Partitioner
// kept between records and its partitions sharing each column's buffer
// (what a hash aggregation's partitioning does).
func BenchmarkPartitionShared(b *testing.B) {
	d := benchInput(b, "int64", 100_000)
	mem := memory.NewGoAllocator()
	pt := Partitioner{Shared: true}
	b.ResetTimer()
	cpu0 := benchCPU()
	for range b.N {
		for _, rec := range d.recs {
			parts, err := pt.Partition(mem, rec, []int{0}, 8)
			if err != nil {
				b.Fatal(err)
			}
			for _, p := range parts {
				if p != nil {
					p.Release()
				}
			}
		}
	}
	benchReport(b, benchRows, cpu0)
}

// BenchmarkHashRows hashes the int64 key column.
func BenchmarkHashRows(b *testing.B) {
	d := benchInput(b, "int64", 100_000)
	out := make([]uint64, benchBatch)
	b.ResetTimer()
	cpu0 := benchCPU()
	for range b.N {
		for _, rec := range d.recs {
			if err := HashRows(rec.Columns()[:1], out); err != nil {
				b.Fatal(err)
			}
		}
	}
	benchReport(b, benchRows, cpu0)
}
