package kernel

import (
	"runtime"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BenchmarkGroupByMemory10MKeys measures what a GroupBy of 10M distinct
// int64 keys with two int64 aggregates (sum and count) holds: the Go heap
// in use after a GC, and the process's peak resident set (which includes
// the test binary and the input batches streamed through it). Run with
// -benchtime 1x:
//
//	go test -run '^$' -bench GroupByMemory10MKeys -benchtime 1x ./batch/
func BenchmarkGroupByMemory10MKeys(b *testing.B) {
	const keys, per = 10_000_000, 1 << 16
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	for range b.N {
		mem := memory.NewGoAllocator()
		g, err := NewGroupBy(mem, schema, []string{"k"}, []Agg{sumOf("v"), countOf("*")})
		if err != nil {
			b.Fatal(err)
		}
		kb, vb := array.NewInt64Builder(mem), array.NewInt64Builder(mem)
		for start := 0; start < keys; start += per {
			n := min(per, keys-start)
			for i := 0; i < n; i++ {
				kb.Append(int64(start+i) * 7919)
				vb.Append(int64(i % 1000))
			}
			kc, vc := kb.NewArray(), vb.NewArray()
			rec := array.NewRecordBatch(schema, []arrow.Array{kc, vc}, int64(n))
			kc.Release()
			vc.Release()
			if err := g.Merge(rec); err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
		kb.Release()
		vb.Release()
		if g.Len() != keys {
			b.Fatalf("%d groups, want %d", g.Len(), keys)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heapMB")
		b.ReportMetric(float64(ru.Maxrss)/1024, "peakRSSMB")
		b.ReportMetric(float64(g.MemoryBytes())/(1<<20), "groupByMB")
		runtime.KeepAlive(g)
		g.Release()
	}
}
