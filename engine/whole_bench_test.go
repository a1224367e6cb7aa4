//go:build unix

package engine

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/onceflow/onceflow/batch"
)

// BenchmarkWholeTable compares, on the same data in the same run, an
// in-memory group-by (sum and count per key, update mode, 8 state
// partitions, a local checkpoint) on one working table (the default,
// whole.go) with the partitioned path it replaced (each row hashed into
// its partition's table, the adaptive combiner before it): 10 batches of
// 200k rows, 5 rows per key and batch (the bench's agg shape) and 50. The
// rows/cpu-s metric is the figure to compare (the process's user and
// system CPU, so the parallel merges of the partitioned path count).
//
//	go test -run '^$' -bench BenchmarkWholeTable -benchtime 3x ./engine/
func BenchmarkWholeTable(b *testing.B) {
	const batches, rowsPerBatch = 10, 200_000
	for _, keys := range []int64{40_000, 4_000} {
		for _, path := range []string{"whole", "partitioned"} {
			b.Run(fmt.Sprintf("keys=%d/%s", keys, path), func(b *testing.B) {
				var cpu time.Duration
				for b.Loop() {
					b.StopTimer()
					src := newSeq(batches*rowsPerBatch, rowsPerBatch, keys)
					s := ReadStream(src).GroupBy("key").Agg(batch.Sum(batch.Col("amount")).As("sum"), batch.CountRows().As("n"))
					sink := &countSink{}
					q, err := NewQuery(s, WithCheckpoint(localStoreB(b)), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(8))
					if err != nil {
						b.Fatal(err)
					}
					q.cfg.partitionedAgg = path == "partitioned"
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					c0 := processCPU(b)
					b.StartTimer()
					err = q.Run(ctx)
					b.StopTimer()
					cpu += processCPU(b) - c0
					cancel()
					if err != nil {
						b.Fatal(err)
					}
					if want := int64(batches) * keys; sink.rows != want {
						b.Fatalf("%d rows out, want %d", sink.rows, want)
					}
					b.StartTimer() // b.Loop checks with the timer running
				}
				rows := float64(b.N * batches * rowsPerBatch)
				b.ReportMetric(rows/cpu.Seconds(), "rows/cpu-s")
				b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
