package pebblestore

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
	"github.com/onceflow/onceflow/storage/s3store"
)

var (
	figureKeys  = flag.Int("pebble.figures", 0, "keys of the README's figures run (e.g. 10000000); 0 skips TestFigures")
	figureCache = flag.Int("pebble.cache", 64, "MiB of the block cache in TestFigures")
)

// The figures' state: a group-by of int64 keys with sum and count.
var (
	figKey = arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
	figVal = arrow.NewSchema([]arrow.Field{
		{Name: "sum", Type: arrow.PrimitiveTypes.Int64},
		{Name: "count", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
)

func figRows(mem memory.Allocator, ks []int64, v int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, statestore.Join(figKey, figVal))
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(ks, nil)
	for _, k := range ks {
		b.Field(1).(*array.Int64Builder).Append(k * v)
		b.Field(2).(*array.Int64Builder).Append(v)
	}
	return b.NewRecordBatch()
}

// rss returns the resident and peak resident set sizes in MiB.
func rss(t testing.TB) (cur, peak int64) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		var v int64
		if n, _ := fmt.Sscanf(line, "VmRSS: %d kB", &v); n == 1 {
			cur = v / 1024
		}
		if n, _ := fmt.Sscanf(line, "VmHWM: %d kB", &v); n == 1 {
			peak = v / 1024
		}
	}
	return cur, peak
}

// TestFigures measures what the README reports for the pebble backend:
// RSS with N keys of sum and count, lookup and commit time at 1k and 100k
// changed keys, upload size per version, and restore time on a fresh
// directory from a local folder and from S3 (when ONCEFLOW_TEST_S3_ENDPOINT
// is set). The memory budget is the block cache (-pebble.cache MiB) plus
// two memtables, logged first; RSS is read from /proc/self/status (VmRSS,
// and VmHWM for the peak). Run it without -race:
//
//	cd statestore/pebblestore && go test -count=1 -run TestFigures -v -timeout 120m -pebble.figures=100000000 -pebble.cache 256 ./
//
// Last run (2 December 2026, 2 shared cores under load 20–30): 100M keys
// loaded in 7m57s; RSS 70 MiB after loading (peak 189 MiB), 627 MiB after
// the commits (peak 682 MiB); lookup / commit 30.8 ms / 6.3 ms at 1k
// changed keys, 1.91 s / 530 ms at 100k; first upload 1879.8 MiB, then
// 138.6 / 58.6 MiB a version; restore on a fresh directory 20.2 s from
// the local folder, 29.6 s from versitygw. The whole run took 12m33s.
func TestFigures(t *testing.T) {
	n := *figureKeys
	if n == 0 {
		t.Skip("set -pebble.figures=KEYS to measure (see the README)")
	}
	ctx := context.Background()
	mem := memory.NewGoAllocator()
	dir := t.TempDir()
	st, err := storage.OpenLocal(filepath.Join(dir, "checkpoint"), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cache := NewCache(int64(*figureCache) << 20)
	defer cache.Unref()
	t.Logf("memory budget: block cache %d MiB + 2 memtables of %d MiB (one store open at a time)", *figureCache, DefaultMemTableSize>>20)
	open := func(st storage.Store, work string) *Store {
		s, err := Open(ctx, st, Options{
			State: statestore.Options{KeySchema: figKey, ValueSchema: figVal, Allocator: mem, UniqueUpserts: true, MinVersionsToRetain: 10},
			Dir:   work, Cache: cache, UploadEvery: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open(st, filepath.Join(dir, "work"))
	if err := s.Restore(ctx, -1); err != nil {
		t.Fatal(err)
	}
	v := int64(0)
	start := time.Now()
	const chunk = 1 << 20
	for lo := 0; lo < n; lo += chunk {
		ks := make([]int64, 0, chunk)
		for k := lo; k < min(n, lo+chunk); k++ {
			ks = append(ks, int64(k)*7919) // spread, not dense
		}
		r := figRows(mem, ks, v+1)
		if err := s.Commit(ctx, v, r, nil); err != nil {
			t.Fatal(err)
		}
		r.Release()
		v++
	}
	t.Logf("load %d keys in %d versions: %s", n, v, time.Since(start).Round(time.Millisecond))
	if err := s.Maintain(ctx, v-1); err != nil {
		t.Fatal(err)
	}
	full := s.LastUpload()
	t.Logf("first upload (whole state): %d files, %.1f MiB", full.NewFiles, float64(full.NewBytes)/(1<<20))
	debug.FreeOSMemory()
	cur, peak := rss(t)
	t.Logf("RSS after load: %d MiB (peak %d MiB, the peak includes the 1Mi-row commits' Arrow records and delta encoding)", cur, peak)

	rng := rand.New(rand.NewPCG(1, 2))
	for _, changed := range []int{1000, 100_000} {
		var lookupTotal, commitTotal, maintTotal time.Duration
		var upBytes int64
		const rounds = 5
		for range rounds {
			ks := make([]int64, changed)
			seen := map[int64]bool{}
			for i := range ks {
				for {
					k := int64(rng.IntN(n+n/4)) * 7919 // 80% existing keys, 20% new
					if !seen[k] {
						seen[k] = true
						ks[i] = k
						break
					}
				}
			}
			r := figRows(mem, ks, v+1)
			k := figRows(mem, ks, v+1)
			t0 := time.Now()
			got, err := s.Lookup(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			got.Release()
			lookupTotal += time.Since(t0)
			t0 = time.Now()
			if err := s.Commit(ctx, v, r, nil); err != nil {
				t.Fatal(err)
			}
			commitTotal += time.Since(t0)
			r.Release()
			k.Release()
			t1 := time.Now()
			if err := s.Maintain(ctx, v); err != nil {
				t.Fatal(err)
			}
			maintTotal += time.Since(t1)
			upBytes += s.LastUpload().NewBytes
			if err := s.Purge(ctx, v); err != nil {
				t.Fatal(err)
			}
			v++
		}
		t.Logf("%d changed keys: lookup %s, commit (delta written with fsync, then applied) %s per version; upload per version (flush, checkpoint, new SSTs + manifest) %.2f MiB in %s", changed, (lookupTotal / rounds).Round(time.Microsecond), (commitTotal / rounds).Round(time.Microsecond), float64(upBytes)/rounds/(1<<20), (maintTotal / rounds).Round(time.Millisecond))
	}
	debug.FreeOSMemory()
	cur, peak = rss(t)
	t.Logf("RSS after the commits: %d MiB (peak %d MiB)", cur, peak)
	last := v - 1
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var folderBytes int64
	for _, in := range info {
		folderBytes += in.Size
	}
	t.Logf("checkpoint folder: %d objects, %.1f MiB", len(info), float64(folderBytes)/(1<<20))

	t0 := time.Now()
	b := open(st, filepath.Join(dir, "fresh-local"))
	if err := b.Restore(ctx, last); err != nil {
		t.Fatal(err)
	}
	t.Logf("restore version %d on a fresh directory from the local folder: %s", last, time.Since(t0).Round(time.Millisecond))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	if os.Getenv(testenv.S3EnvVar) == "" {
		t.Logf("S3 restore skipped: %s is unset", testenv.S3EnvVar)
		return
	}
	loc := testenv.S3Bucket(t)
	s3, err := s3store.New(ctx, loc.Bucket, "state", loc.Options)
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	for _, in := range info {
		data, err := st.Get(ctx, in.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := s3.Put(ctx, in.Name, data); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("copied the folder to S3 in %s", time.Since(t1).Round(time.Millisecond))
	t2 := time.Now()
	c := open(s3, filepath.Join(dir, "fresh-s3"))
	if err := c.Restore(ctx, last); err != nil {
		t.Fatal(err)
	}
	t.Logf("restore version %d on a fresh directory from S3 (versitygw): %s", last, time.Since(t2).Round(time.Millisecond))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
