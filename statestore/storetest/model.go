// Package storetest is the model test of state backends: random commits,
// purges, background maintenance, crashes inside batches (a version's delta
// written but not committed, then re-run with other changes), torn
// temporary files, crashes inside a purge and restarts, every load checked
// against a map model. statestore runs it against the in-memory Store and
// statestore/pebblestore against its Store; a backend passes it through a
// small Store interface and an opener.
//
// It is test code: it imports testing and nothing else of the engine.
package storetest

import (
	"cmp"
	"context"
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

	"github.com/onceflow/onceflow/statestore"
)

// Store is what the model drives: the engine's calls on one partition.
type Store interface {
	Commit(ctx context.Context, version int64, upserts, deletes arrow.RecordBatch) error
	Load(ctx context.Context, version int64) ([]arrow.RecordBatch, error)
	Maintain(ctx context.Context, committed int64) error
	Purge(ctx context.Context, committed int64) error
}

// Opener opens the store of folder dir (a local directory) with options o,
// positioned at committed, the last committed version (-1: none), as the
// engine's startup does. crashed says the previous Store of the folder
// was not closed but killed (the opener may simulate what a kill loses);
// prev is that Store (nil on the first open), which the opener closes or
// drops. committed -2 asks only to close prev (the end of a run).
type Opener func(t testing.TB, dir string, o statestore.Options, committed int64, prev Store, crashed bool) Store

// Config sizes a run.
type Config struct {
	Seeds    int
	Versions int64
	Sizes    []int // key pool sizes to draw from; default 20, 300, 1000
}

// ModelSchemas returns the model's key and value schemas.
func ModelSchemas() (key, value *arrow.Schema) { return mKey, mValue }

// Run runs the model with c.Seeds seeds of c.Versions versions each.
func Run(t *testing.T, c Config, open Opener) {
	if c.Seeds == 0 {
		c.Seeds = 4
	}
	if c.Versions == 0 {
		c.Versions = 80
	}
	if len(c.Sizes) == 0 {
		c.Sizes = []int{20, 300, 1000}
	}
	for seed := 1; seed <= c.Seeds; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			runModel(t, uint64(seed), c, open)
		})
	}
}

func newMem(t testing.TB) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

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
	b := array.NewRecordBuilder(mem, statestore.Join(mKey, mValue))
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
		if rec.NumCols() != 4 {
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
	switch rng.IntN(6) {
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

func commitModel(t testing.TB, s Store, mem memory.Allocator, rng *rand.Rand, version int64, ups []mrow, dels []mkey) {
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
	if err := s.Commit(context.Background(), version, u, d); err != nil {
		t.Fatalf("commit %d: %v", version, err)
	}
}

func runModel(t *testing.T, seed uint64, c Config, open Opener) {
	rng := rand.New(rand.NewPCG(seed, 99))
	mem := newMem(t)
	ctx := context.Background()
	dir := t.TempDir()
	var opts statestore.Options
	// A restart may change the snapshot policy and the retention (the
	// engine's WithSnapshotEvery and WithMinBatchesToRetain).
	policy := func() {
		k := 1 + rng.IntN(5)
		opts = statestore.Options{
			KeySchema:           mKey,
			ValueSchema:         mValue,
			SnapshotEvery:       k,
			SnapshotMaxEvery:    k + rng.IntN(8),
			SnapshotDeltaRatio:  []float64{1e-9, 0.3, 0.5, 2, 1e9}[rng.IntN(5)],
			MinVersionsToRetain: 1 + rng.IntN(6),
			Allocator:           mem,
			UniqueUpserts:       rng.IntN(2) == 0,
		}
	}
	policy()
	pool := keyPool(rng, c.Sizes[rng.IntN(len(c.Sizes))])
	t.Logf("K=%d max=%d ratio=%g retain=%d keys=%d", opts.SnapshotEvery, opts.SnapshotMaxEvery, opts.SnapshotDeltaRatio, opts.MinVersionsToRetain, len(pool))

	s := open(t, dir, opts, -1, nil, false)
	reopen := func(committed int64, crashed bool) {
		if rng.IntN(3) == 0 {
			policy()
		}
		s = open(t, dir, opts, committed, s, crashed)
	}
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

	load := func(st Store, v int64) []mrow {
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
	for v := int64(0); v < c.Versions; v++ {
		ups, dels, next := modelChanges(rng, pool, model, v)
		if rng.IntN(12) == 0 {
			// Crash: batch v's delta is written (maybe a maintenance
			// pass is running) but commits/v is not. Restart at v-1
			// and re-run v, this time with other changes.
			cu, cd, _ := modelChanges(rng, pool, model, v+1000)
			commitModel(t, s, mem, rng, v, cu, cd)
			if rng.IntN(2) == 0 {
				// A torn write of a snapshot or delta leaves a temporary file.
				name := statestore.FileName(v-1+int64(rng.IntN(2)), rng.IntN(2) == 0)
				if err := os.WriteFile(filepath.Join(dir, name+".1.7.tmp"), []byte("OFST garbage"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			waitMaint()
			reopen(v-1, true)
			checkRows(t, fmt.Sprintf("restart: load %d", v-1), load(s, v-1), history[v-1])
		}
		commitModel(t, s, mem, rng, v, ups, dels)
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
					if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			waitMaint()
			reopen(v, true)
		case 2:
			purge(v)
			waitMaint()
			reopen(v, false) // a clean restart
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
	for _, k := range keep {
		checkRows(t, fmt.Sprintf("records of version %d kept until the end", k.version), readModelRows(t, k.recs), history[k.version])
	}
	last := c.Versions - 1
	s = open(t, dir, opts, last, s, false)
	checkRows(t, fmt.Sprintf("load %d after a clean restart", last), load(s, last), model)
	s = open(t, dir, opts, last, s, true)
	checkRows(t, fmt.Sprintf("load %d after a crash", last), load(s, last), model)
	open(t, dir, opts, -2, s, false) // -2: close only
}

// dirFiles returns the content of every file under dir, by slash path.
func dirFiles(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
