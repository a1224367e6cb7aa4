package statestore

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// baseRecords returns n rows of the test schema, keys "u%09d" (shard 0) in
// ascending key-encoding order, in records of 64Ki rows.
func baseRecords(mem memory.Allocator, n int) []arrow.RecordBatch {
	var recs []arrow.RecordBatch
	b := array.NewRecordBuilder(mem, Join(testKey, testValue))
	defer b.Release()
	users := b.Field(0).(*array.StringBuilder)
	shards := b.Field(1).(*array.Int64Builder)
	counts := b.Field(2).(*array.Int64Builder)
	seen := b.Field(3).(*array.ListBuilder)
	var key []byte
	for i := 0; i < n; i++ {
		key = strconv.AppendInt(append(key[:0], "u000000000"...), int64(i), 10)
		key = append(key[:1], key[len(key)-9:]...)
		users.BinaryBuilder.Append(key)
		shards.Append(0)
		counts.Append(int64(i))
		seen.AppendNull()
		if (i+1)%(64<<10) == 0 || i == n-1 {
			recs = append(recs, b.NewRecordBatch())
		}
	}
	return recs
}

// writeBaseSnapshot makes version `version` a snapshot holding n rows,
// written directly (as Maintain would after n keys arrived).
func writeBaseSnapshot(b *testing.B, s *Store, version int64, n int) {
	recs := baseRecords(s.mem, n)
	data, err := encodeFile(kindSnapshot, version, []section{{schema: s.rowSchema, recs: recs}}, s.mem)
	releaseAll(recs)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.st.Put(context.Background(), fileName(version, kindSnapshot), data); err != nil {
		b.Fatal(err)
	}
}

// changedRows returns 1k rows spread over a state of n keys: half
// overwrite existing keys, half are new.
func changedRows(n, k int) []row {
	out := make([]row, 0, k)
	for i := 0; i < k; i++ {
		id := (i * (n / k)) % n
		u := fmt.Sprintf("u%09d", id)
		if i%2 == 1 {
			u = fmt.Sprintf("n%09d", i)
		}
		out = append(out, row{user: u, shard: 0, count: int64(i), seen: []string{"a", "b"}})
	}
	return out
}

// BenchmarkCommit commits 1k changed keys (and 3 deletes) as version 1 over a state of
// 10k or 10M keys held in snapshot 0. Commit never reads the state, so the
// two should cost the same.
func BenchmarkCommit(b *testing.B) {
	for _, sync := range []bool{false, true} {
		for _, n := range []int{10_000, 10_000_000} {
			b.Run(fmt.Sprintf("sync=%v/state=%d", sync, n), func(b *testing.B) {
				ctx := context.Background()
				mem := memory.NewGoAllocator()
				st := newLocal(b, b.TempDir())
				if sync {
					st = newSyncedLocal(b, b.TempDir())
				}
				s := openTest(b, st, mem, 10, 100)
				writeBaseSnapshot(b, s, 0, n)
				ups := buildUpserts(mem, changedRows(n, 1000))
				defer ups.Release()
				dels := buildDeletes(mem, []row{{user: "u000000001"}, {user: "u000000003"}, {user: "u000000005"}})
				defer dels.Release()
				cpu := cpuTime(b)
				for b.Loop() {
					if err := s.Commit(ctx, 1, ups, dels); err != nil {
						b.Fatal(err)
					}
				}
				reportCPU(b, cpu)
				b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// BenchmarkLoad loads a version held in one snapshot (the restart path),
// and one that is a snapshot plus 9 deltas of 1k changed keys.
func BenchmarkLoad(b *testing.B) {
	for _, tc := range []struct{ n, deltas int }{{1_000_000, 0}, {1_000_000, 9}, {10_000_000, 0}, {10_000_000, 9}} {
		n, deltas := tc.n, tc.deltas
		b.Run(fmt.Sprintf("state=%d/deltas=%d", n, deltas), func(b *testing.B) {
			ctx := context.Background()
			mem := memory.NewGoAllocator()
			s := openTest(b, newLocal(b, b.TempDir()), mem, 10, 100)
			writeBaseSnapshot(b, s, 0, n)
			for v := 1; v <= deltas; v++ {
				ups := buildUpserts(mem, changedRows(n, 1000))
				if err := s.Commit(ctx, int64(v), ups, nil); err != nil {
					b.Fatal(err)
				}
				ups.Release()
			}
			var rows int64
			cpu := cpuTime(b)
			for b.Loop() {
				recs, err := s.Load(ctx, int64(deltas))
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range recs {
					rows += r.NumRows()
				}
				releaseAll(recs)
			}
			reportCPU(b, cpu)
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// BenchmarkLoadDeltasOnly loads a version that no snapshot covers: 10
// deltas of 10k new keys each, interleaved in key order (the gather path).
func BenchmarkLoadDeltasOnly(b *testing.B) {
	ctx := context.Background()
	mem := memory.NewGoAllocator()
	s := openTest(b, newLocal(b, b.TempDir()), mem, 1000, 100)
	const perDelta, deltas = 10_000, 10
	for v := 0; v < deltas; v++ {
		rows := make([]row, perDelta)
		for i := range rows {
			rows[i] = row{user: fmt.Sprintf("u%09d", i*deltas+v), count: int64(i), seen: []string{"a"}}
		}
		ups := buildUpserts(mem, rows)
		if err := s.Commit(ctx, int64(v), ups, nil); err != nil {
			b.Fatal(err)
		}
		ups.Release()
	}
	var rows int64
	cpu := cpuTime(b)
	for b.Loop() {
		recs, err := s.Load(ctx, deltas-1)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			rows += r.NumRows()
		}
		releaseAll(recs)
	}
	reportCPU(b, cpu)
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}
