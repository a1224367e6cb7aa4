package statestore

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var modelLong = flag.Bool("model-long", false, "run the model test with many more seeds and versions")

// The model test's state: key (k binary nullable, n int32), value (v int64,
// s utf8 nullable). Keys are chosen to tie on their first 8 and 16 encoded
// bytes, hold zero bytes, be empty, null or very long.
var (
	mKey = arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int32},
	}, nil)
	mValue = arrow.NewSchema([]arrow.Field{
		{Name: "v", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
)

type mkey struct {
	null bool
	k    string
	n    int32
}

func (k mkey) id() string { return fmt.Sprintf("%t|%q|%d", k.null, k.k, k.n) }

// cmpKey is the order Load promises, computed without the key encoding:
// nulls first, bytes in byte order (a prefix first), then n.
func cmpKey(a, b mkey) int {
	if a.null != b.null {
		if a.null {
			return -1
		}
		return 1
	}
	if c := strings.Compare(a.k, b.k); c != 0 && !a.null {
		return c
	}
	return cmp.Compare(a.n, b.n)
}

type mrow struct {
	key   mkey
	v     int64
	s     string
	sNull bool
}

func (r mrow) String() string { return fmt.Sprintf("{%s v=%d s=%q/%t}", r.key.id(), r.v, r.s, r.sNull) }

// keyPool returns n distinct keys of awkward shapes.
func keyPool(rng *rand.Rand, n int) []mkey {
	seen := map[string]bool{}
	var out []mkey
	ns := []int32{0, 1, -1, math.MinInt32, math.MaxInt32}
	for len(out) < n {
		var k mkey
		switch rng.IntN(9) {
		case 0:
			k.k = ""
		case 1:
			k.k = strings.Repeat("\x00", 1+rng.IntN(4))
		case 2: // ties on the first 8 encoded bytes (01 + 7)
			k.k = "abcdefg" + string(rune('a'+rng.IntN(4))) + strings.Repeat("\x00", rng.IntN(2))
		case 3: // ties on the first 16 encoded bytes
			k.k = "0123456789abcde" + fmt.Sprint(rng.IntN(50))
		case 4: // a zero byte right at the tie
			k.k = "0123456789abcde" + "\x00" + fmt.Sprint(rng.IntN(20))
		case 5: // long
			k.k = strings.Repeat("x", 16+rng.IntN(3000)) + fmt.Sprint(rng.IntN(10))
		case 6:
			k.null = true
		case 7: // random bytes
			b := make([]byte, rng.IntN(20))
			for i := range b {
				b[i] = []byte{0, 1, 0xFF, 'a', 0xFE}[rng.IntN(5)]
			}
			k.k = string(b)
		default:
			k.k = fmt.Sprintf("key-%04d", rng.IntN(3*n))
		}
		k.n = ns[rng.IntN(len(ns))]
		if rng.IntN(3) == 0 {
			k.n = int32(rng.IntN(1000))
		}
		if seen[k.id()] {
			continue
		}
		seen[k.id()] = true
		out = append(out, k)
	}
	return out
}

func buildKeyCols(b *array.RecordBuilder, keys []mkey) {
	for _, k := range keys {
		if k.null {
			b.Field(0).(*array.BinaryBuilder).AppendNull()
		} else {
			b.Field(0).(*array.BinaryBuilder).Append([]byte(k.k))
		}
		b.Field(1).(*array.Int32Builder).Append(k.n)
	}
}

func buildModelUpserts(mem memory.Allocator, rows []mrow) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, Join(mKey, mValue))
	defer b.Release()
	keys := make([]mkey, len(rows))
	for i, r := range rows {
		keys[i] = r.key
	}
	buildKeyCols(b, keys)
	for _, r := range rows {
		b.Field(2).(*array.Int64Builder).Append(r.v)
		if r.sNull {
			b.Field(3).(*array.StringBuilder).AppendNull()
		} else {
			b.Field(3).(*array.StringBuilder).Append(r.s)
		}
	}
	return b.NewRecordBatch()
}

func buildModelDeletes(mem memory.Allocator, keys []mkey) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, mKey)
	defer b.Release()
	buildKeyCols(b, keys)
	return b.NewRecordBatch()
}

func readModelRows(t testing.TB, recs []arrow.RecordBatch) []mrow {
	t.Helper()
	var out []mrow
	for _, rec := range recs {
		if !schemasMatch(Join(mKey, mValue), rec.Schema()) {
			t.Fatalf("record schema %s", rec.Schema())
		}
		ks := rec.Column(0).(*array.Binary)
		ns := rec.Column(1).(*array.Int32)
		vs := rec.Column(2).(*array.Int64)
		ss := rec.Column(3).(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			r := mrow{key: mkey{null: ks.IsNull(i), n: ns.Value(i)}, v: vs.Value(i), sNull: ss.IsNull(i)}
			if !r.key.null {
				r.key.k = string(ks.Value(i))
			}
			if !r.sNull {
				r.s = ss.Value(i)
			}
			out = append(out, r)
		}
	}
	return out
}

func sortedModel(m map[string]mrow) []mrow {
	out := slices.Collect(maps.Values(m))
	slices.SortFunc(out, func(a, b mrow) int { return cmpKey(a.key, b.key) })
	return out
}

func checkRows(t testing.TB, what string, got []mrow, want map[string]mrow) {
	t.Helper()
	w := sortedModel(want)
	if slices.Equal(got, w) {
		return
	}
	for i := 0; i < max(len(got), len(w)); i++ {
		var g, x string
		if i < len(got) {
			g = got[i].String()
		}
		if i < len(w) {
			x = w[i].String()
		}
		if g != x {
			if len(g) > 200 {
				g = g[:200] + "…"
			}
			if len(x) > 200 {
				x = x[:200] + "…"
			}
			t.Fatalf("%s: %d rows, want %d; first difference at row %d:\ngot  %s\nwant %s", what, len(got), len(w), i, g, x)
		}
	}
}

// modelChanges draws one batch's changes against m (which it does not
// change) and returns them with the state after them.
func modelChanges(rng *rand.Rand, pool []mkey, m map[string]mrow, version int64) (ups []mrow, dels []mkey, next map[string]mrow) {
	next = maps.Clone(m)
	var n int
	switch rng.IntN(8) {
	case 6, 7:
		if version == 0 {
			break
		}
		// Every live key changes and a few new ones come: a batch that
		// commitModel may write as a full delta.
		for i, r := range sortedModel(m) {
			r.v = version*1_000_000 + 500_000 + int64(i)
			ups = append(ups, r)
			next[r.key.id()] = r
		}
		for i := 0; i < rng.IntN(3); i++ {
			k := pool[rng.IntN(len(pool))]
			if _, ok := next[k.id()]; ok {
				continue
			}
			r := mrow{key: k, v: version*1_000_000 + 900_000 + int64(i), sNull: true}
			ups = append(ups, r)
			next[k.id()] = r
		}
		return ups, nil, next
	case 0:
		n = 0
	case 1, 2:
		n = 1 + rng.IntN(8)
	default:
		n = 1 + rng.IntN(min(len(pool), 400))
	}
	if version == 0 {
		n = 2 * len(pool) // a large state, then few changes: long untouched runs
	}
	touched := map[string]bool{}
	for i := 0; i < n; i++ {
		k := pool[rng.IntN(len(pool))]
		if touched[k.id()] {
			continue
		}
		touched[k.id()] = true
		_, live := m[k.id()]
		if live && rng.IntN(3) == 0 || !live && rng.IntN(8) == 0 {
			dels = append(dels, k)
			delete(next, k.id())
			continue
		}
		r := mrow{key: k, v: version*1_000_000 + int64(i)}
		switch rng.IntN(4) {
		case 0:
			r.sNull = true
		case 1:
		default:
			r.s = fmt.Sprintf("s%d\x00%d", version, i) + strings.Repeat("y", rng.IntN(40))
		}
		ups = append(ups, r)
		next[k.id()] = r
	}
	return ups, dels, next
}

// commitModel commits ups and dels; when full (ups are every live row of
// the version and dels is empty) mostly as a full delta (CommitFull).
func commitModel(t testing.TB, s *Store, mem memory.Allocator, rng *rand.Rand, version int64, ups []mrow, dels []mkey, full bool) {
	t.Helper()
	var u, d arrow.RecordBatch
	if len(ups) > 0 || rng.IntN(2) == 0 {
		u = buildModelUpserts(mem, ups)
		defer u.Release()
	}
	if len(dels) > 0 || rng.IntN(2) == 0 {
		d = buildModelDeletes(mem, dels)
		defer d.Release()
	}
	if len(dels) == 0 && len(ups) > 0 && full && rng.IntN(4) > 0 {
		if err := s.CommitFull(context.Background(), version, u); err != nil {
			t.Fatalf("commit full %d: %v", version, err)
		}
		return
	}
	if err := s.Commit(context.Background(), version, u, d); err != nil {
		t.Fatalf("commit %d: %v", version, err)
	}
}

// TestModelRandomized drives the store as the engine does (commit, purge,
// maintain in the background, one pass at a time) with random snapshot
// policies, record sizes, crashes (a batch whose delta is written but not
// committed, then a restart that re-runs it with other changes) and
// leftover temporary files, and checks every load against a map model:
// the newest version, the one before it, a random retained one, and
// records loaded earlier and kept across later commits.
func TestModelRandomized(t *testing.T) {
	seeds, versions := 4, 80
	if *modelLong {
		seeds, versions = 60, 300
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			runModel(t, uint64(seed), int64(versions))
		})
	}
}

func runModel(t *testing.T, seed uint64, versions int64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	mem := newMem(t)
	ctx := context.Background()
	dir := t.TempDir()
	var (
		opts     Options
		snapRows int
		concat   int
	)
	// A restart may change the snapshot policy and the retention (the
	// engine's WithSnapshotEvery and WithMinBatchesToRetain).
	policy := func() {
		k := 1 + rng.IntN(5)
		opts = Options{
			KeySchema:           mKey,
			ValueSchema:         mValue,
			SnapshotEvery:       k,
			SnapshotMaxEvery:    k + rng.IntN(8),
			SnapshotDeltaRatio:  []float64{1e-9, 0.3, 0.5, 2, 1e9}[rng.IntN(5)],
			MinVersionsToRetain: 1 + rng.IntN(6),
			Allocator:           mem,
			UniqueUpserts:       rng.IntN(2) == 0,
		}
		snapRows = []int{3, 17, 200, 2000}[rng.IntN(4)]
		concat = []int{1, concatRun, 1000}[rng.IntN(3)]
	}
	policy()
	sizes := []int{20, 300, 1000}
	if *modelLong {
		sizes = append(sizes, 4000) // runs past directRun untouched rows
	}
	pool := keyPool(rng, sizes[rng.IntN(len(sizes))])
	t.Logf("K=%d max=%d ratio=%g retain=%d snapshotRows=%d concatRun=%d keys=%d",
		opts.SnapshotEvery, opts.SnapshotMaxEvery, opts.SnapshotDeltaRatio, opts.MinVersionsToRetain, snapRows, concat, len(pool))

	open := func() *Store {
		if rng.IntN(3) == 0 {
			policy()
		}
		s, err := Open(ctx, newLocal(t, dir), opts)
		if err != nil {
			t.Fatal(err)
		}
		s.snapshotRows, s.concatRun = snapRows, concat
		return s
	}
	s, err := Open(ctx, newLocal(t, dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	s.snapshotRows, s.concatRun = snapRows, concat
	floor := int64(-1) // every version from floor on is retained
	purge := func(c int64) {
		t.Helper()
		if err := s.Purge(ctx, c); err != nil {
			t.Fatal(err)
		}
		floor = max(floor, c-int64(opts.MinVersionsToRetain)+1)
	}

	// Background maintenance, one pass at a time, as the engine runs it.
	var (
		wg       sync.WaitGroup
		busy     bool
		mu       sync.Mutex
		maintErr error
	)
	maintain := func(c int64) {
		mu.Lock()
		defer mu.Unlock()
		if busy {
			return
		}
		busy = true
		st := s
		wg.Go(func() {
			err := st.Maintain(ctx, c)
			mu.Lock()
			busy = false
			if err != nil && maintErr == nil {
				maintErr = fmt.Errorf("maintain %d: %w", c, err)
			}
			mu.Unlock()
		})
	}
	waitMaint := func() {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if maintErr != nil {
			t.Fatal(maintErr)
		}
	}
	defer wg.Wait()

	load := func(st *Store, v int64) []mrow {
		t.Helper()
		recs, err := st.Load(ctx, v)
		if err != nil {
			t.Fatalf("load %d: %v", v, err)
		}
		defer releaseAll(recs)
		return readModelRows(t, recs)
	}

	type kept struct {
		version int64
		recs    []arrow.RecordBatch
	}
	var keep []kept
	defer func() {
		for _, k := range keep {
			releaseAll(k.recs)
		}
	}()

	history := map[int64]map[string]mrow{-1: {}}
	model := map[string]mrow{}
	for v := int64(0); v < versions; v++ {
		ups, dels, next := modelChanges(rng, pool, model, v)
		if rng.IntN(12) == 0 {
			// Crash: batch v's delta is written (maybe a snapshot pass
			// is running) but commits/v is not. Restart, load v-1,
			// and re-run v, this time with other changes.
			cu, cd, cnext := modelChanges(rng, pool, model, v+1000)
			commitModel(t, s, mem, rng, v, cu, cd, len(cd) == 0 && len(cu) == len(cnext))
			if rng.IntN(2) == 0 {
				// A torn write of a snapshot or delta leaves a temporary file.
				name := fileName(v-1+int64(rng.IntN(2)), []kind{kindDelta, kindSnapshot}[rng.IntN(2)])
				if err := os.WriteFile(filepath.Join(dir, name+".1.7.tmp"), []byte("OFST garbage"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			waitMaint()
			s = open()
			checkRows(t, fmt.Sprintf("restart: load %d", v-1), load(s, v-1), history[v-1])
		}
		commitModel(t, s, mem, rng, v, ups, dels, len(dels) == 0 && len(ups) == len(next))
		model = next
		history[v] = model
		// commits/v is durable: purge, then maintain in the background.
		switch rng.IntN(15) {
		case 0: // no purge this time
		case 1:
			// A crash inside Purge: some of its deletes happened.
			waitMaint()
			before := dirFiles(t, dir)
			purge(v)
			after := dirFiles(t, dir)
			for name, data := range before {
				if _, ok := after[name]; !ok && rng.IntN(2) == 0 {
					if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			waitMaint()
			s = open()
		default:
			purge(v)
		}
		if rng.IntN(4) == 0 {
			waitMaint() // sometimes maintenance keeps up
		}
		maintain(v)
		checkRows(t, fmt.Sprintf("load %d", v), load(s, v), model)
		if v > 0 && v-1 >= floor {
			checkRows(t, fmt.Sprintf("load %d at %d", v-1, v), load(s, v-1), history[v-1])
		}
		lo := max(floor, 0)
		r := lo + rng.Int64N(v-lo+1)
		checkRows(t, fmt.Sprintf("load %d at %d", r, v), load(s, r), history[r])
		if rng.IntN(10) == 0 {
			recs, err := s.Load(ctx, v)
			if err != nil {
				t.Fatal(err)
			}
			keep = append(keep, kept{v, recs})
		}
	}
	waitMaint()
	// A snapshot of the last version, then its load.
	last := versions - 1
	for _, k := range keep {
		checkRows(t, fmt.Sprintf("records of version %d kept until the end", k.version), readModelRows(t, k.recs), history[k.version])
	}
	_, snaps, err := s.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshots %v", snaps)
	if len(snaps) == 0 || snaps[len(snaps)-1] != last {
		s.opts.SnapshotEvery, s.opts.SnapshotMaxEvery = 1, 1
		if err := s.Maintain(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	checkSnapshotChunks(t, s, last)
	checkRows(t, fmt.Sprintf("load %d from its snapshot", last), load(s, last), model)
	recs, err := s.Load(ctx, last)
	if err != nil {
		t.Fatal(err)
	}
	checkKeyOrder(t, recs, s.nkeys)
	releaseAll(recs)
}

// dirFiles returns the content of every file in dir.
func dirFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}
