package pebblestore

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

var benchKeys = flag.Int("pebble.benchkeys", 1_000_000, "keys in the store of BenchmarkLookupCommit")

// BenchmarkLookupCommit measures what one batch of a group-by costs on the
// pebble backend: Lookup of its keys (random, 80% present) in a store of
// -pebble.benchkeys int64 keys with sum and count (64 MiB block cache),
// then Commit of their new rows (the delta written with fsync, then
// applied). Per op: one batch of 1k or 100k changed keys.
//
//	cd statestore/pebblestore && go test -run '^$' -bench LookupCommit -benchtime 20x -pebble.benchkeys 10000000 ./
func BenchmarkLookupCommit(b *testing.B) {
	ctx := context.Background()
	mem := memory.NewGoAllocator()
	dir := b.TempDir()
	st, err := storage.OpenLocal(filepath.Join(dir, "checkpoint"), storage.LocalOptions{})
	if err != nil {
		b.Fatal(err)
	}
	cache := NewCache(64 << 20)
	defer cache.Unref()
	s, err := Open(ctx, st, Options{
		State: statestore.Options{KeySchema: figKey, ValueSchema: figVal, Allocator: mem, UniqueUpserts: true, MinVersionsToRetain: 2},
		Dir:   filepath.Join(dir, "work"), Cache: cache, UploadEvery: 1 << 30,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Restore(ctx, -1); err != nil {
		b.Fatal(err)
	}
	n := *benchKeys
	v := int64(0)
	const chunk = 1 << 20
	for lo := 0; lo < n; lo += chunk {
		ks := make([]int64, 0, chunk)
		for k := lo; k < min(n, lo+chunk); k++ {
			ks = append(ks, int64(k)*7919)
		}
		r := figRows(mem, ks, v+1)
		if err := s.Commit(ctx, v, r, nil); err != nil {
			b.Fatal(err)
		}
		r.Release()
		v++
	}
	rng := rand.New(rand.NewPCG(3, 4))
	batch := func(changed int) []int64 {
		ks := make([]int64, changed)
		seen := make(map[int64]bool, changed)
		for i := range ks {
			for {
				k := int64(rng.IntN(n+n/4)) * 7919 // 80% present, 20% new
				if !seen[k] {
					seen[k] = true
					ks[i] = k
					break
				}
			}
		}
		return ks
	}
	for _, changed := range []int{1000, 100_000} {
		b.Run(fmt.Sprintf("lookup-%d", changed), func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				b.StopTimer()
				k := figRows(mem, batch(changed), v)
				b.StartTimer()
				got, err := s.Lookup(ctx, k)
				if err != nil {
					b.Fatal(err)
				}
				got.Release()
				k.Release()
			}
		})
		b.Run(fmt.Sprintf("commit-%d", changed), func(b *testing.B) {
			defer reportCPU(b)()
			for b.Loop() {
				b.StopTimer()
				r := figRows(mem, batch(changed), v+1)
				b.StartTimer()
				if err := s.Commit(ctx, v, r, nil); err != nil {
					b.Fatal(err)
				}
				r.Release()
				v++
			}
		})
	}
}

// reportCPU reports the process's CPU time (user+system, all threads,
// background compactions included) per op beside the wall time: on a
// shared machine the wall time includes waiting for a core.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	t0 := cpu()
	return func() {
		b.ReportMetric(float64(cpu()-t0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	}
}
