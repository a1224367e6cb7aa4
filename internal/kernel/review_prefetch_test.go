package kernel

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Review tests of commit 82bc094: the string-key probe prefetches the next
// block's slots (prefetchStrSlots) and always pipelines on amd64, and
// bytesKeys doubles at half full up to strHalfSlots (strLimit).

// revMode is a way bytesKeys probes: as it chooses (on amd64 the
// pipelined loop with prefetch), forced direct, forced pipelined.
type revMode struct {
	name string
	set  func(*bytesKeys)
}

var revModes = []revMode{
	{"default", func(*bytesKeys) {}},
	{"direct", func(k *bytesKeys) { k.direct = true }},
	{"pipelined", func(k *bytesKeys) { k.pipelined = true }},
}

// revKey is a key of the model: its bytes, or null.
type revKey struct {
	b    []byte
	null bool
}

// revPool is a pool of distinct single-column keys with the lengths the
// inline/long split cares about (0, 7, 8, 15, 16 and long), keys that
// differ only in trailing zero bytes, long keys that differ in their last
// byte, and nulls.
func revPool(r *rand.Rand, n int) []revKey {
	seen := map[string]bool{}
	var pool []revKey
	add := func(b []byte) {
		if !seen[string(b)] {
			seen[string(b)] = true
			pool = append(pool, revKey{b: b})
		}
	}
	add([]byte{})
	for l := 1; l <= 17; l++ {
		add(bytes.Repeat([]byte{0}, l))
		add(append([]byte("ab"), bytes.Repeat([]byte{0}, l)...))
	}
	long := bytes.Repeat([]byte("0123456789abcdef"), 8)
	for i := range 20 {
		k := slices.Clone(long)
		k[len(k)-1] = byte(i)
		add(k)
	}
	lens := []int{1, 2, 6, 7, 8, 9, 14, 15, 16, 17, 23, 24, 31, 32, 33, 64, 200, 1000}
	for len(pool) < n {
		l := lens[r.IntN(len(lens))]
		b := make([]byte, l)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		add(b)
	}
	pool = append(pool, revKey{null: true})
	return pool
}

// revArray builds an array of dt holding keys, after pad rows of other
// keys that it then slices off (pad > 0: a non-zero offset).
func revArray(mem memory.Allocator, dt arrow.DataType, keys []revKey, pad int) arrow.Array {
	var b array.Builder
	appendKey := func(k revKey) {
		if k.null {
			b.AppendNull()
			return
		}
		switch bb := b.(type) {
		case *array.StringBuilder:
			bb.Append(string(k.b))
		case *array.LargeStringBuilder:
			bb.Append(string(k.b))
		case *array.BinaryBuilder:
			bb.Append(k.b)
		}
	}
	switch dt.ID() {
	case arrow.STRING:
		b = array.NewStringBuilder(mem)
	case arrow.LARGE_STRING:
		b = array.NewLargeStringBuilder(mem)
	default:
		b = array.NewBinaryBuilder(mem, dt.(arrow.BinaryDataType))
	}
	defer b.Release()
	for i := range pad {
		if i%3 == 0 {
			b.AppendNull()
		} else {
			appendKey(revKey{b: []byte(fmt.Sprintf("pad-%d-long-enough-to-be-long", i))})
		}
	}
	for _, k := range keys {
		appendKey(k)
	}
	a := b.NewArray()
	if pad == 0 {
		return a
	}
	s := array.NewSlice(a, int64(pad), int64(pad+len(keys)))
	a.Release()
	return s
}

// revModel is what a key table must do: group ids dense in order of first
// sight, and per find call the distinct groups in first-seen order.
type revModel struct {
	ids  map[string]uint32
	keys []string
}

func newRevModel() *revModel { return &revModel{ids: map[string]uint32{}} }

func (m *revModel) find(keys []string) (gids, groups []uint32) {
	seen := map[uint32]bool{}
	for _, k := range keys {
		g, ok := m.ids[k]
		if !ok {
			g = uint32(len(m.keys))
			m.ids[k] = g
			m.keys = append(m.keys, k)
		}
		gids = append(gids, g)
		if !seen[g] {
			seen[g] = true
			groups = append(groups, g)
		}
	}
	return gids, groups
}

func revKeyString(k revKey) string {
	if k.null {
		return "\x00null"
	}
	return "v" + string(k.b)
}

// revCheckFind runs one find of tab and compares it with the model.
func revCheckFind(t *testing.T, what string, tab *bytesKeys, m *revModel, cols []arrow.Array, keys []string, seq uint32) {
	t.Helper()
	n := cols[0].Len()
	gids := make([]uint32, n)
	// groups with something already in it: find must append.
	pre := []uint32{7777}
	groups := tab.find(cols, gids, seq, pre)
	wantGids, wantGroups := m.find(keys)
	if !slices.Equal(gids, wantGids) {
		for i := range gids {
			if gids[i] != wantGids[i] {
				t.Fatalf("%s: row %d (key %q): gid %d, want %d", what, i, keys[i], gids[i], wantGids[i])
			}
		}
	}
	if groups[0] != 7777 || !slices.Equal(groups[1:], wantGroups) {
		t.Fatalf("%s: groups %v, want 7777 then %v", what, revHead(groups), revHead(wantGroups))
	}
	if tab.len() != len(m.keys) {
		t.Fatalf("%s: %d groups, want %d", what, tab.len(), len(m.keys))
	}
	if lim := strLimit(len(tab.slots)); tab.len() > lim+1 {
		// +1: the null group has no slot
		t.Fatalf("%s: %d groups in %d slots, limit %d", what, tab.len(), len(tab.slots), lim)
	}
}

func revHead(s []uint32) []uint32 {
	if len(s) > 20 {
		return s[:20]
	}
	return s
}

// revCheckArrays compares the key columns of all groups with the model
// (single column).
func revCheckArrays(t *testing.T, what string, tab *bytesKeys, m *revModel) {
	t.Helper()
	arrs := tab.arrays(memory.NewGoAllocator(), nil)
	defer arrs[0].Release()
	a := arrs[0]
	if a.Len() != len(m.keys) {
		t.Fatalf("%s: arrays has %d rows, want %d", what, a.Len(), len(m.keys))
	}
	for g, want := range m.keys {
		var got string
		switch c := a.(type) {
		case *array.String:
			got = "v" + c.Value(g)
		case *array.LargeString:
			got = "v" + c.Value(g)
		case *array.Binary:
			got = "v" + string(c.Value(g))
		case *array.LargeBinary:
			got = "v" + string(c.Value(g))
		}
		if a.IsNull(g) {
			got = "\x00null"
		}
		if got != want {
			t.Fatalf("%s: group %d key %q, want %q", what, g, got, want)
		}
	}
}

var revVarTypes = []arrow.DataType{
	arrow.BinaryTypes.String, arrow.BinaryTypes.Binary,
	arrow.BinaryTypes.LargeString, arrow.BinaryTypes.LargeBinary,
}

// TestReviewPrefetchSingleKeyModes: every probe mode of a single
// string/binary/large key column gives the model's gids and first-seen
// groups, over several find calls (seq tracking), with nulls, the empty
// key, keys of 0-17 bytes differing in trailing zeros, long keys, sliced
// arrays, and the table growing from minTableSlots through many resizes,
// some in the middle of a block.
func TestReviewPrefetchSingleKeyModes(t *testing.T) {
	for _, dt := range revVarTypes {
		for _, mode := range revModes {
			for _, pad := range []int{0, 3} {
				name := fmt.Sprintf("%s/%s/pad%d", dt, mode.name, pad)
				t.Run(name, func(t *testing.T) {
					mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
					defer mem.AssertSize(t, 0)
					r := rand.New(rand.NewPCG(1, uint64(pad)))
					pool := revPool(r, 6000)
					tab := newKeyTable([]arrow.Field{{Name: "k", Type: dt, Nullable: true}}).(*bytesKeys)
					mode.set(tab)
					m := newRevModel()
					// sizes: odd sizes so blocks end anywhere; the pool
					// grows so new keys arrive mid-block in later calls.
					sizes := []int{1, 17, 130, 1, 333, 2000, 4097, 9000, 50}
					for call, sz := range sizes {
						avail := min(len(pool), 200+call*900)
						keys := make([]revKey, sz)
						strs := make([]string, sz)
						for i := range keys {
							if r.IntN(20) == 0 {
								keys[i] = revKey{null: true}
							} else {
								keys[i] = pool[r.IntN(avail)]
							}
							strs[i] = revKeyString(keys[i])
						}
						a := revArray(mem, dt, keys, pad)
						revCheckFind(t, fmt.Sprintf("call %d", call), tab, m, []arrow.Array{a}, strs, uint32(call+1))
						a.Release()
					}
					revCheckArrays(t, "end", tab, m)
				})
			}
		}
	}
}

// TestReviewPrefetchResizeMidBlock: a table one key short of its limit
// gets a record whose second row is new, so the table doubles while the
// probe is in the first block and the second block's slots were computed
// (and prefetched) against the old table; every later row must still be
// found at its own group, and the next record's rows must see the new
// table only.
func TestReviewPrefetchResizeMidBlock(t *testing.T) {
	for _, mode := range revModes {
		for _, at := range []int{0, 1, probeBlock - 1, probeBlock, probeBlock + 1, 2*probeBlock - 1} {
			t.Run(fmt.Sprintf("%s/at%d", mode.name, at), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				tab := newKeyTable([]arrow.Field{{Name: "k", Type: arrow.BinaryTypes.String, Nullable: true}}).(*bytesKeys)
				mode.set(tab)
				m := newRevModel()
				keyAt := func(i int) revKey {
					if i%5 == 0 {
						return revKey{b: []byte(fmt.Sprintf("a long key number %08d", i))}
					}
					return revKey{b: []byte(fmt.Sprintf("k%d", i))}
				}
				fill := strLimit(minTableSlots)
				var keys []revKey
				var strs []string
				for i := range fill {
					keys = append(keys, keyAt(i))
					strs = append(strs, revKeyString(keyAt(i)))
				}
				a := revArray(mem, arrow.BinaryTypes.String, keys, 0)
				revCheckFind(t, "fill", tab, m, []arrow.Array{a}, strs, 1)
				a.Release()
				if len(tab.slots) != minTableSlots {
					t.Fatalf("%d groups took %d slots, want %d", fill, len(tab.slots), minTableSlots)
				}
				// old keys, a new key at row at (the table is full: it
				// doubles), then old and new keys over 5 blocks.
				keys, strs = keys[:0], strs[:0]
				for i := range 5 * probeBlock {
					var k revKey
					switch {
					case i < at:
						k = keyAt(i * 7 % fill)
					case i == at:
						k = keyAt(fill)
					case i%2 == 0:
						k = keyAt(fill + i)
					default:
						k = keyAt(i * 3 % fill)
					}
					keys = append(keys, k)
					strs = append(strs, revKeyString(k))
				}
				a = revArray(mem, arrow.BinaryTypes.String, keys, 0)
				revCheckFind(t, "grow", tab, m, []arrow.Array{a}, strs, 2)
				a.Release()
				if len(tab.slots) != 2*minTableSlots {
					t.Fatalf("%d groups in %d slots, want %d", tab.len(), len(tab.slots), 2*minTableSlots)
				}
				revCheckArrays(t, "end", tab, m)
			})
		}
	}
}

// revMultiCols builds the columns (string, int64, binary; all nullable)
// of rows keys and the model key of each row.
func revMultiCols(mem memory.Allocator, r *rand.Rand, n, distinct int, pad int) ([]arrow.Array, []string) {
	sb := array.NewStringBuilder(mem)
	ib := array.NewInt64Builder(mem)
	bb := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	defer sb.Release()
	defer ib.Release()
	defer bb.Release()
	var strs []string
	for i := range n + pad {
		x := r.IntN(distinct)
		key := ""
		// column 0: strings of lengths that put the row encoding around
		// 7, 8, 15, 16 bytes and above.
		switch {
		case x%11 == 0:
			sb.AppendNull()
			key += "N|"
		default:
			s := fmt.Sprintf("%0*d", x%13, x)
			sb.Append(s)
			key += "s" + s + "|"
		}
		switch {
		case x%7 == 0:
			ib.AppendNull()
			key += "N|"
		default:
			ib.Append(int64(x % 97))
			key += fmt.Sprintf("i%d|", x%97)
		}
		switch {
		case x%5 == 0:
			bb.AppendNull()
			key += "N"
		default:
			v := bytes.Repeat([]byte{byte(x)}, x%19)
			bb.Append(v)
			key += "b" + string(v)
		}
		if i >= pad {
			strs = append(strs, key)
		}
	}
	cols := []arrow.Array{sb.NewArray(), ib.NewArray(), bb.NewArray()}
	if pad > 0 {
		for i, c := range cols {
			cols[i] = array.NewSlice(c, int64(pad), int64(pad+n))
			c.Release()
		}
	}
	return cols, strs
}

// TestReviewPrefetchMultiKeyModes: multi-column keys (row encoding) give
// the model's gids and groups in every probe mode, over several calls,
// with nulls in every column and sliced columns.
func TestReviewPrefetchMultiKeyModes(t *testing.T) {
	fields := []arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "b", Type: arrow.BinaryTypes.Binary, Nullable: true},
	}
	for _, mode := range revModes {
		for _, pad := range []int{0, 5} {
			t.Run(fmt.Sprintf("%s/pad%d", mode.name, pad), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				r := rand.New(rand.NewPCG(2, uint64(pad)))
				tab := newKeyTable(fields).(*bytesKeys)
				if tab.single {
					t.Fatal("three key columns make a single-column table")
				}
				mode.set(tab)
				m := newRevModel()
				for call, sz := range []int{3, 100, 1, 5000, 777, 3000} {
					cols, strs := revMultiCols(mem, r, sz, 200+call*1000, pad)
					revCheckFind(t, fmt.Sprintf("call %d", call), tab, m, cols, strs, uint32(call+1))
					for _, c := range cols {
						c.Release()
					}
				}
			})
		}
	}
}

// revGroupBy makes a GroupBy of count(*) and sum(v) by the string column k.
func revGroupBy(t *testing.T, mem memory.Allocator, dt arrow.DataType) *GroupBy {
	t.Helper()
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: dt, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	g, err := NewGroupBy(mem, sch, []string{"k"}, []Agg{countOf("*"), sumOf("v")})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// revRecord is a record of keys and v = 1 for each.
func revRecord(mem memory.Allocator, dt arrow.DataType, keys []revKey, pad int) arrow.RecordBatch {
	k := revArray(mem, dt, keys, pad)
	vb := array.NewInt64Builder(mem)
	for range keys {
		vb.Append(1)
	}
	v := vb.NewArray()
	vb.Release()
	return gbRecord([]string{"k", "v"}, k, v)
}

// TestReviewPrefetchGroupByModes: a GroupBy whose key table is forced
// direct and one that takes the default (pipelined, prefetching) loop give
// the same Changes (first-touch order), Output, Remove result and Len
// over batches of several merges each, with a removal and a Reset between
// batches and the seq counter wrapping.
func TestReviewPrefetchGroupByModes(t *testing.T) {
	for _, dt := range revVarTypes {
		t.Run(dt.String(), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			gs := []*GroupBy{revGroupBy(t, mem, dt), revGroupBy(t, mem, dt), revGroupBy(t, mem, dt)}
			gbForceDirect(gs[1])
			gbForceLarge(gs[2], 1<<30)
			for _, g := range gs {
				g.seq = math.MaxUint32 - 5 // wraps during the test
			}
			r := rand.New(rand.NewPCG(3, 4))
			pool := revPool(r, 5000)
			for b := range 8 {
				for _, g := range gs {
					g.ClearChanges()
				}
				for mi := range 3 {
					sz := []int{5, 300, 2500}[(b+mi)%3]
					keys := make([]revKey, sz)
					for i := range keys {
						keys[i] = pool[r.IntN(min(len(pool), 100+b*700))]
					}
					rec := revRecord(mem, dt, keys, b%2)
					for _, g := range gs {
						if err := g.Merge(rec); err != nil {
							t.Fatal(err)
						}
					}
					rec.Release()
				}
				var want []string
				for gi, g := range gs {
					ch := g.Changes()
					out := g.Output(false)
					got := append(revRows(ch), "--")
					got = append(got, revRows(out)...)
					ch.Release()
					out.Release()
					if gi == 0 {
						want = got
					} else if !slices.Equal(got, want) {
						t.Fatalf("batch %d: groupby %d differs from the default one (%d vs %d lines)", b, gi, len(got), len(want))
					}
				}
				switch b {
				case 3:
					for gi, g := range gs {
						rem, err := g.Remove(func(_ []arrow.Array, out []bool) {
							for i := range out {
								out[i] = i%4 != 1
							}
						})
						if err != nil {
							t.Fatal(err)
						}
						rem.Release()
						tab := g.keys.(*bytesKeys)
						if n := g.Len(); n > strLimit(len(tab.slots)) || len(tab.slots) > minTableSlots && n < strLimit(len(tab.slots)/2) {
							t.Fatalf("groupby %d after Remove: %d groups in %d slots (limit %d)", gi, n, len(tab.slots), strLimit(len(tab.slots)))
						}
					}
				case 5:
					for _, g := range gs {
						g.Reset()
					}
				}
			}
			for _, g := range gs {
				g.Release()
			}
		})
	}
}

// revRows renders a record's rows with ValueStr (any column type).
func revRows(rec arrow.RecordBatch) []string {
	var out []string
	for i := range int(rec.NumRows()) {
		line := ""
		for _, c := range rec.Columns() {
			line += c.ValueStr(i) + " "
		}
		out = append(out, line)
	}
	return out
}

// TestReviewPrefetchStrLimit: strLimit never lets a table fill (limit <
// slots, so an insert always finds an empty slot), grows with the table
// across strHalfSlots (so doubling always makes room and compact's sizing
// loop ends), and is n/2 up to strHalfSlots, 7/8 above.
func TestReviewPrefetchStrLimit(t *testing.T) {
	prev := 0
	for n := minTableSlots; n <= 1<<34; n *= 2 {
		lim := strLimit(n)
		if lim <= prev || lim >= n || lim <= 0 {
			t.Fatalf("strLimit(%d) = %d after strLimit(%d) = %d", n, lim, n/2, prev)
		}
		want := n / 2
		if n > strHalfSlots {
			want = n - n/8
		}
		if lim != want {
			t.Fatalf("strLimit(%d) = %d, want %d", n, lim, want)
		}
		prev = lim
	}
	if strLimit(strHalfSlots) != strHalfSlots/2 || strLimit(2*strHalfSlots) != tableLimit(2*strHalfSlots) {
		t.Fatalf("boundary: strLimit(%d) = %d, strLimit(%d) = %d", strHalfSlots, strLimit(strHalfSlots), 2*strHalfSlots, strLimit(2*strHalfSlots))
	}
	// A table that doubles at its limit is then within the new limit, on
	// each side of the boundary.
	for n := minTableSlots; n <= 1<<30; n *= 2 {
		if strLimit(n)+1 > strLimit(2*n) {
			t.Fatalf("after doubling %d slots at %d groups, %d > limit %d", n, strLimit(n), strLimit(n)+1, strLimit(2*n))
		}
	}
}

// TestReviewPrefetchLoad is TestU64KeysLoad for bytesKeys: after merges
// (the table growing within a record, pipelined on amd64) the table is
// at most half full and the smallest that is; after a removal compact
// picks the smallest table strLimit allows; every group keeps its sums.
func TestReviewPrefetchLoad(t *testing.T) {
	for _, n := range []int{100, 128, 129, 3000, 140_000} {
		for _, mode := range revModes[:2] {
			t.Run(fmt.Sprintf("%d/%s", n, mode.name), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				keys := make([]revKey, n)
				for i := range keys {
					keys[i] = revKey{b: []byte(fmt.Sprintf("%x-%d", splitmixTest(uint64(i))>>uint(i%60), i))}
				}
				rec := revRecord(mem, arrow.BinaryTypes.String, keys, 0)
				defer rec.Release()
				g := revGroupBy(t, mem, arrow.BinaryTypes.String)
				defer g.Release()
				tab := g.keys.(*bytesKeys)
				mode.set(tab)
				check := func(what string, groups int, tight bool) {
					t.Helper()
					slots := len(tab.slots)
					if g.Len() != groups || g.Len() > strLimit(slots) {
						t.Fatalf("%s: %d groups (want %d) in %d slots, at most %d allowed", what, g.Len(), groups, slots, strLimit(slots))
					}
					if tight && slots > minTableSlots && g.Len() < strLimit(slots/2) {
						t.Fatalf("%s: %d groups in %d slots: %d would do", what, g.Len(), slots, slots/2)
					}
					if mb := g.MemoryBytes(); mb < int64(slots)*24 {
						t.Fatalf("%s: MemoryBytes %d < %d slots of 24 bytes", what, mb, slots)
					}
				}
				for range 2 {
					if err := g.Merge(rec); err != nil {
						t.Fatal(err)
					}
				}
				check("merged", n, true)
				removed, err := g.Remove(func(_ []arrow.Array, out []bool) {
					for i := range out {
						out[i] = i%3 != 0
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				removed.Release()
				check("removed", n-(n+2)/3, true)
				out := g.Output(false)
				sums := out.Column(2).(*array.Int64)
				for i := range int(out.NumRows()) {
					if sums.Value(i) != 2 {
						t.Fatalf("group %d sum %d, want 2", i, sums.Value(i))
					}
				}
				out.Release()
				// Reset keeps the slots; merging again refills them.
				slots := len(tab.slots)
				g.Reset()
				if len(tab.slots) != slots || g.Len() != 0 {
					t.Fatalf("Reset: %d slots (had %d), %d groups", len(tab.slots), slots, g.Len())
				}
				if err := g.Merge(rec); err != nil {
					t.Fatal(err)
				}
				check("reset+merged", n, false)
			})
		}
	}
}

// TestReviewPrefetchRemoveBeforeMerge: Remove on a string-keyed GroupBy
// that has never merged, then Merge of keys a, b, c, a: three groups, with
// their own counts and sums.
func TestReviewPrefetchRemoveBeforeMerge(t *testing.T) {
	for _, mode := range revModes[:2] {
		t.Run(mode.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			g := revGroupBy(t, mem, arrow.BinaryTypes.String)
			defer g.Release()
			mode.set(g.keys.(*bytesKeys))
			rem, err := g.Remove(func(_ []arrow.Array, out []bool) {})
			if err != nil {
				t.Fatal(err)
			}
			rem.Release()
			rec := revRecord(mem, arrow.BinaryTypes.String, []revKey{{b: []byte("a")}, {b: []byte("b")}, {b: []byte("c")}, {b: []byte("a")}}, 0)
			defer rec.Release()
			if err := g.Merge(rec); err != nil {
				t.Fatal(err)
			}
			if g.Len() != 3 {
				t.Fatalf("%d groups after compact of an empty table and a merge of a, b, c, a; want 3", g.Len())
			}
			out := g.Output(false)
			defer out.Release()
			if got := gbRows(out); !slices.Equal(got, []string{"a 2 2", "b 1 1", "c 1 1"}) {
				t.Fatalf("output %q", got)
			}
		})
	}
}

// TestReviewPrefetchAsmSlots: prefetchStrSlots reads only pos[0:n] and
// writes nothing, for n = 0, 1 and a full block, with the last slot of the
// table (its second prefetch at the slot's last byte, p*24+23).
func TestReviewPrefetchAsmSlots(t *testing.T) {
	if got := int(unsafe.Sizeof(strSlot{})); got != 24 {
		t.Fatalf("strSlot is %d bytes; prefetchStrSlots assumes 24", got)
	}
	slots := make([]strSlot, minTableSlots)
	for i := range slots {
		slots[i] = strSlot{w0: uint64(i), w1: ^uint64(i), gid: uint32(i), seq: uint32(3 * i)}
	}
	before := slices.Clone(slots)
	var pos [probeBlock + 1]uint64
	for i := range pos {
		pos[i] = uint64(len(slots) - 1 - i%3)
	}
	pos[probeBlock] = 1 << 60 // past n: must not be read
	prefetchStrSlots(&slots[0], &pos[0], 0)
	prefetchStrSlots(&slots[0], &pos[0], 1)
	prefetchStrSlots(&slots[0], &pos[0], probeBlock)
	if !slices.Equal(slots, before) {
		t.Fatal("prefetchStrSlots changed the slots")
	}
	// strLoadBlock's positions are h>>shift of the table it is given:
	// always inside it, at every size.
	for _, n := range []int{minTableSlots, 1 << 12, 1 << 20} {
		shift := tableShift(n)
		for _, h := range []uint64{0, 1, math.MaxUint64, math.MaxUint64 >> 1} {
			if p := h >> shift; p >= uint64(n) {
				t.Fatalf("table of %d: hash %x at slot %d", n, h, p)
			}
		}
	}
}

// TestReviewPrefetchHalfBoundary crosses strHalfSlots for real: a table
// of strHalfSlots slots at its limit (strHalfSlots/2 groups, faked as
// empty-arena groups so no keys need hashing) takes one more key and must
// double to 2*strHalfSlots with a 7/8 limit, and the key must be found
// again. It allocates about 300 MiB, so it runs only with
// ONCEFLOW_REVIEW_BIG=1.
func TestReviewPrefetchHalfBoundary(t *testing.T) {
	if os.Getenv("ONCEFLOW_REVIEW_BIG") == "" {
		t.Skip("set ONCEFLOW_REVIEW_BIG=1 (allocates about 300 MiB)")
	}
	for _, mode := range revModes {
		t.Run(mode.name, func(t *testing.T) {
			tab := newKeyTable([]arrow.Field{{Name: "k", Type: arrow.BinaryTypes.String}}).(*bytesKeys)
			mode.set(tab)
			tab.resize(strHalfSlots)
			full := strLimit(strHalfSlots)
			// full groups whose keys are "" (only offsets, no slots: the
			// limit counts groups, resize moves slots).
			tab.offs = make([]int64, full+1)
			a := revArray(memory.DefaultAllocator, arrow.BinaryTypes.String, []revKey{{b: []byte("x")}, {b: []byte("y")}, {b: []byte("x")}}, 0)
			defer a.Release()
			gids := make([]uint32, 3)
			groups := tab.find([]arrow.Array{a}, gids, 1, nil)
			if len(tab.slots) != 2*strHalfSlots {
				t.Fatalf("%d slots after passing %d groups, want %d", len(tab.slots), full, 2*strHalfSlots)
			}
			if want := []uint32{uint32(full), uint32(full + 1), uint32(full)}; !slices.Equal(gids, want) {
				t.Fatalf("gids %v, want %v", gids, want)
			}
			if len(groups) != 2 {
				t.Fatalf("groups %v", groups)
			}
			if strLimit(len(tab.slots)) != tableLimit(2*strHalfSlots) {
				t.Fatalf("limit %d", strLimit(len(tab.slots)))
			}
		})
	}
}

// TestReviewPrefetchOtherArch: the kernel builds and vets where
// prefetchStrSlots is the Go no-op (arm64, 386). It runs the go tool, so
// not in -short mode.
func TestReviewPrefetchOtherArch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool on PATH: %v", err)
	}
	for _, c := range []struct{ arch, cmd string }{{"arm64", "vet"}, {"386", "build"}} {
		cmd := exec.Command(gobin, c.cmd, ".")
		cmd.Env = append(os.Environ(), "GOARCH="+c.arch, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOARCH=%s go %s ./internal/kernel/: %v\n%s", c.arch, c.cmd, err, out)
		}
	}
}
