package statestore

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The settlement aggregation's state: a merchant key, a sum and a count.
var (
	aggKey = arrow.NewSchema([]arrow.Field{{Name: "key", Type: arrow.BinaryTypes.String}}, nil)
	aggVal = arrow.NewSchema([]arrow.Field{
		{Name: "total_cents", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "payments", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
)

// aggChanges returns the changes of one batch: the keys ids (in the given
// order, as a hash table hands them out) with values derived from seed.
func aggChanges(mem memory.Allocator, ids []int, seed int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, Join(aggKey, aggVal))
	defer b.Release()
	keys := b.Field(0).(*array.StringBuilder)
	sums := b.Field(1).(*array.Int64Builder)
	counts := b.Field(2).(*array.Int64Builder)
	var buf []byte
	for _, id := range ids {
		buf = strconv.AppendInt(append(buf[:0], "k-"...), int64(id), 10)
		keys.BinaryBuilder.Append(buf)
		sums.Append(int64(id)*7 + seed)
		counts.Append(seed + 1)
	}
	return b.NewRecordBatch()
}

// hashOrder returns 0..n-1 in a scrambled but fixed order.
func hashOrder(n int, stride int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (i * stride) % n
	}
	return ids
}

// BenchmarkMaintain measures the cost of one snapshot written by Maintain:
//
//   - churn: the bench's settlement partition (12.5k merchants, every batch
//     touches every key), snapshot K versions after the previous one;
//   - sparse: a large state (state keys in snapshot 0) and K deltas of
//     1k changed keys each, so the snapshot rewrites the whole state for
//     few changes.
func BenchmarkMaintain(b *testing.B) {
	const k = 10
	for _, tc := range []struct {
		name         string
		state, touch int
	}{
		{"churn/state=12500", 12_500, 12_500},
		{"sparse/state=1000000", 1_000_000, 1_000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			mem := memory.NewGoAllocator()
			// A tiny ratio: the snapshot is due at K whatever the sizes.
			s, err := Open(ctx, newLocal(b, b.TempDir()), Options{KeySchema: aggKey, ValueSchema: aggVal, SnapshotEvery: k, SnapshotDeltaRatio: 1e-9, MinVersionsToRetain: 100, Allocator: mem, UniqueUpserts: true})
			if err != nil {
				b.Fatal(err)
			}
			// Version 0 holds the whole state.
			all := aggChanges(mem, hashOrder(tc.state, 7919), 0)
			if err := s.Commit(ctx, 0, all, nil); err != nil {
				b.Fatal(err)
			}
			all.Release()
			base := int64(-1)
			if tc.touch < tc.state {
				// A snapshot of version 0, as an earlier Maintain wrote it.
				s0 := *s
				s0.opts.SnapshotEvery = 1
				if err := s0.Maintain(ctx, 0); err != nil {
					b.Fatal(err)
				}
				base = 0
			}
			ids := hashOrder(tc.state, 104729)
			last := base + k
			for v := int64(1); v <= last; v++ {
				off := int(v) * tc.touch % tc.state
				sel := append([]int(nil), ids[off:min(off+tc.touch, tc.state)]...)
				ch := aggChanges(mem, sel, v)
				if err := s.Commit(ctx, v, ch, nil); err != nil {
					b.Fatal(err)
				}
				ch.Release()
			}
			name := fileName(last, kindSnapshot)
			cpu := cpuTime(b)
			for b.Loop() {
				b.StopTimer()
				_ = s.st.Delete(ctx, name)
				b.StartTimer()
				if err := s.Maintain(ctx, last); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
			in, err := s.Info(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if in.NewestSnapshot != last {
				b.Fatalf("no snapshot written: %+v", in)
			}
			b.ReportMetric(float64(tc.state)*float64(b.N)/b.Elapsed().Seconds(), "staterows/s")
		})
	}
}

// BenchmarkMaintainAmortized commits 100 versions of 1k changed keys over
// a state of 1M keys and runs Maintain after each, as the engine does, and
// reports Maintain's time per version: with snapshots every K=10 versions
// whatever the sizes (ratio=0, the former policy) and with the default
// SnapshotDeltaRatio.
func BenchmarkMaintainAmortized(b *testing.B) {
	const state, touch, versions = 1_000_000, 1_000, 100
	for _, ratio := range []float64{1e-9, DefaultSnapshotDeltaRatio} {
		b.Run(fmt.Sprintf("ratio=%g", ratio), func(b *testing.B) {
			ctx := context.Background()
			mem := memory.NewGoAllocator()
			s, err := Open(ctx, newLocal(b, b.TempDir()), Options{KeySchema: aggKey, ValueSchema: aggVal, SnapshotEvery: 10, SnapshotDeltaRatio: ratio, Allocator: mem, UniqueUpserts: true})
			if err != nil {
				b.Fatal(err)
			}
			all := aggChanges(mem, hashOrder(state, 7919), 0)
			if err := s.Commit(ctx, 0, all, nil); err != nil {
				b.Fatal(err)
			}
			all.Release()
			s0 := *s
			s0.opts.SnapshotEvery = 1
			if err := s0.Maintain(ctx, 0); err != nil {
				b.Fatal(err)
			}
			ids := hashOrder(state, 104729)
			changes := make([]arrow.RecordBatch, versions)
			for i := range changes {
				off := (i + 1) * touch % state
				changes[i] = aggChanges(mem, ids[off:off+touch], int64(i))
			}
			defer releaseAll(changes)
			var maint time.Duration
			snaps := 0
			v := int64(0)
			cpu := cpuTime(b)
			for b.Loop() {
				for _, ch := range changes {
					v++
					if err := s.Commit(ctx, v, ch, nil); err != nil {
						b.Fatal(err)
					}
					start := time.Now()
					if err := s.Maintain(ctx, v); err != nil {
						b.Fatal(err)
					}
					maint += time.Since(start)
					if err := s.Purge(ctx, v); err != nil {
						b.Fatal(err)
					}
				}
			}
			reportCPU(b, cpu)
			_, sn, err := s.Versions(ctx)
			if err != nil {
				b.Fatal(err)
			}
			snaps = len(sn)
			b.ReportMetric(float64(maint.Nanoseconds())/float64(v), "maint-ns/version")
			b.ReportMetric(float64(snaps), "snapshots-kept")
		})
	}
}

// cpuTime returns the CPU time (user and system, all threads) the process
// has used: the machine is shared, so benchmarks report it beside the wall
// time, which other processes inflate.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per iteration since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((cpuTime(b)-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
