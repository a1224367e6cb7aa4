package kernel

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestPartition(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(5, 5))
	const n = 2000
	// seq numbers the rows so order can be checked after the split.
	sb := array.NewInt64Builder(mem)
	for i := range n {
		sb.Append(int64(i))
	}
	seq := sb.NewArray()
	sb.Release()
	cols := []arrow.Array{seq}
	names := []string{"seq"}
	for _, dt := range append(gbKeyTypes, arrow.ListOf(arrow.PrimitiveTypes.Int32)) {
		if dt.ID() == arrow.LIST {
			lb := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int32)
			vb := lb.ValueBuilder().(*array.Int32Builder)
			for i := range n {
				if i%7 == 0 {
					lb.AppendNull()
					continue
				}
				lb.Append(true)
				for k := range i % 3 {
					vb.Append(int32(i + k))
				}
			}
			cols = append(cols, lb.NewArray())
			lb.Release()
		} else {
			cols = append(cols, gbGen(mem, dt, n, rng, 0.1))
		}
		names = append(names, fmt.Sprintf("c%d", len(names)))
	}
	rec := gbRecord(names, cols...)
	defer rec.Release()
	for _, keys := range [][]int{{4}, {9}, {3, 9, 15}} {
		for _, parts := range []int{1, 3, 8} {
			t.Run(fmt.Sprintf("keys=%v/n=%d", keys, parts), func(t *testing.T) {
				var kc []arrow.Array
				for _, k := range keys {
					kc = append(kc, rec.Column(k))
				}
				h := make([]uint64, n)
				if err := HashRows(kc, h); err != nil {
					t.Fatal(err)
				}
				out, err := Partition(mem, rec, keys, parts)
				if err != nil {
					t.Fatal(err)
				}
				again, err := Partition(mem, rec, keys, parts)
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					for _, o := range append(out, again...) {
						if o != nil {
							o.Release()
						}
					}
				}()
				if len(out) != parts {
					t.Fatalf("%d partitions", len(out))
				}
				total := 0
				for p, part := range out {
					if part == nil {
						if again[p] != nil {
							t.Errorf("partition %d: nil once, not twice", p)
						}
						continue
					}
					if !part.Schema().Equal(rec.Schema()) {
						t.Fatalf("partition %d: schema %s", p, part.Schema())
					}
					gbEqualRecords(t, "determinism", part, again[p])
					s := part.Column(0).(*array.Int64)
					prev := int64(-1)
					for j := range int(part.NumRows()) {
						r := s.Value(j)
						if r <= prev {
							t.Fatalf("partition %d: row %d after %d: order lost", p, r, prev)
						}
						prev = r
						if PartitionOf(h[r], parts) != p {
							t.Fatalf("row %d in partition %d, hash says %d", r, p, PartitionOf(h[r], parts))
						}
						for c := range int(rec.NumCols()) {
							if !array.SliceApproxEqual(part.Column(c), int64(j), int64(j+1), rec.Column(c), r, r+1, array.WithNaNsEqual(true)) {
								t.Fatalf("partition %d row %d column %s differs from input row %d", p, j, rec.ColumnName(c), r)
							}
						}
					}
					total += int(part.NumRows())
				}
				if total != n {
					t.Fatalf("%d rows in the partitions, want %d", total, n)
				}
			})
		}
	}
	sliced := rec.NewSlice(100, 300)
	defer sliced.Release()
	out, err := Partition(mem, sliced, []int{9}, 4)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, o := range out {
		if o != nil {
			rows += int(o.NumRows())
			if o.Column(0).(*array.Int64).Value(0) < 100 {
				t.Errorf("slice offset ignored")
			}
			o.Release()
		}
	}
	if rows != 200 {
		t.Errorf("sliced: %d rows", rows)
	}
	if _, err := Partition(mem, rec, []int{99}, 4); err == nil {
		t.Errorf("bad key column: no error")
	}
	if _, err := Partition(mem, rec, []int{len(names) - 1}, 4); err == nil {
		t.Errorf("list key: no error")
	}
}

// TestPartitionThenGroupBy checks that aggregating each partition apart
// gives the groups of one aggregation over everything, each group in
// exactly one partition.
func TestPartitionThenGroupBy(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(11, 11))
	const parts = 4
	aggs := []Agg{sumOf("v"), countOf("*"), maxOf("v")}
	var whole *GroupBy
	var each [parts]*GroupBy
	for b := range 3 {
		rec := gbRecord([]string{"k", "v"}, gbGen(mem, arrow.BinaryTypes.String, 3000, rng, 0.05), gbGen(mem, arrow.PrimitiveTypes.Int64, 3000, rng, 0.1))
		if b == 0 {
			var err error
			if whole, err = NewGroupBy(mem, rec.Schema(), []string{"k"}, aggs); err != nil {
				t.Fatal(err)
			}
			defer whole.Release()
			for p := range each {
				if each[p], err = NewGroupBy(mem, rec.Schema(), []string{"k"}, aggs); err != nil {
					t.Fatal(err)
				}
				defer each[p].Release()
			}
		}
		if err := whole.Merge(rec); err != nil {
			t.Fatal(err)
		}
		split, err := Partition(mem, rec, []int{0}, parts)
		if err != nil {
			t.Fatal(err)
		}
		for p, r := range split {
			if r == nil {
				continue
			}
			if err := each[p].Merge(r); err != nil {
				t.Fatal(err)
			}
			r.Release()
		}
		rec.Release()
	}
	want := map[string]string{}
	out := whole.Output(false)
	for _, row := range gbRows(out) {
		k, _, _ := strings.Cut(row, " ")
		want[k] = row
	}
	out.Release()
	got := 0
	for p := range each {
		out := each[p].Output(false)
		for _, row := range gbRows(out) {
			k, _, _ := strings.Cut(row, " ")
			if want[k] != row {
				t.Errorf("partition %d: %q, want %q", p, row, want[k])
			}
			got++
		}
		out.Release()
	}
	if got != len(want) {
		t.Errorf("%d groups over the partitions, want %d", got, len(want))
	}
}

// TestPartitionScatterMatchesGather pins the fused scatter of null-free
// fixed-width columns to the per-partition gather it replaces: the same
// records, for every key type, with and without nulls, sliced or not, for
// power-of-two partition counts (masked) and others (modulo).
func TestPartitionScatterMatchesGather(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(9, 9))
	const n = 1000
	var cols []arrow.Array
	var names []string
	for _, nulls := range []float64{0, 0.2} {
		for _, dt := range gbKeyTypes {
			cols = append(cols, gbGen(mem, dt, n, rng, nulls))
			names = append(names, fmt.Sprintf("c%d", len(names)))
		}
	}
	rec := gbRecord(names, cols...)
	defer rec.Release()
	sliced := rec.NewSlice(77, 900)
	defer sliced.Release()
	for _, r := range []arrow.RecordBatch{rec, sliced} {
		for _, keys := range [][]int{{3}, {8, 0}} {
			for _, parts := range []int{5, 8} {
				t.Run(fmt.Sprintf("rows=%d/keys=%v/n=%d", r.NumRows(), keys, parts), func(t *testing.T) {
					fast, err := partition(mem, r, keys, parts, true)
					if err != nil {
						t.Fatal(err)
					}
					slow, err := partition(mem, r, keys, parts, false)
					if err != nil {
						t.Fatal(err)
					}
					for p := range parts {
						if (fast[p] == nil) != (slow[p] == nil) {
							t.Fatalf("partition %d: scatter nil %v, gather nil %v", p, fast[p] == nil, slow[p] == nil)
						}
						if fast[p] != nil {
							gbEqualRecords(t, fmt.Sprintf("partition %d", p), fast[p], slow[p])
							fast[p].Release()
							slow[p].Release()
						}
					}
				})
			}
		}
	}
}

// TestPartitionerSharedMatchesGather pins a Shared partitioner (every
// partition's scattered column a slice of one buffer) to the gather path:
// the same records, over several records of changing sizes with the
// scratch reused, and every buffer freed whatever order the partitions'
// records are released in (the checked allocator would see a leak or a
// double free).
func TestPartitionerSharedMatchesGather(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(11, 3))
	pt := Partitioner{Shared: true}
	for round, n := range []int{1000, 17, 3000, 1, 500} {
		var cols []arrow.Array
		var names []string
		for _, nulls := range []float64{0, 0.2} {
			for _, dt := range gbKeyTypes {
				cols = append(cols, gbGen(mem, dt, n, rng, nulls))
				names = append(names, fmt.Sprintf("c%d", len(names)))
			}
		}
		rec := gbRecord(names, cols...)
		r := rec
		if n > 100 {
			r = rec.NewSlice(13, int64(n-7))
		}
		for _, parts := range []int{5, 8} {
			shared, err := pt.Partition(mem, r, []int{3}, parts)
			if err != nil {
				t.Fatal(err)
			}
			slow, err := partition(mem, r, []int{3}, parts, false)
			if err != nil {
				t.Fatal(err)
			}
			for p := range parts {
				if (shared[p] == nil) != (slow[p] == nil) {
					t.Fatalf("round %d partition %d: shared nil %v, gather nil %v", round, p, shared[p] == nil, slow[p] == nil)
				}
				if slow[p] != nil {
					gbEqualRecords(t, fmt.Sprintf("round %d partition %d", round, p), shared[p], slow[p])
					slow[p].Release()
				}
			}
			// Release the shared records from the last to the first,
			// and every other one first: slices outlive their siblings.
			for p := parts - 1; p >= 0; p -= 2 {
				if shared[p] != nil {
					shared[p].Release()
				}
			}
			for p := parts - 2; p >= 0; p -= 2 {
				if shared[p] != nil {
					shared[p].Release()
				}
			}
		}
		if r != rec {
			r.Release()
		}
		rec.Release()
	}
}

// TestPartitionLike: splitting the first k rows of the record last
// partitioned, without hashing, gives what partitioning them gives; a
// record longer than that, or another partition count, is refused.
func TestPartitionLike(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(5, 8))
	for _, shared := range []bool{false, true} {
		pt := Partitioner{Shared: shared}
		var cols []arrow.Array
		var names []string
		for _, dt := range gbKeyTypes {
			cols = append(cols, gbGen(mem, dt, 2000, rng, 0.1))
			names = append(names, fmt.Sprintf("c%d", len(names)))
		}
		rec := gbRecord(names, cols...)
		for _, k := range []int64{2000, 1999, 700, 1, 0} {
			all, err := pt.Partition(mem, rec, []int{0, 2}, 7)
			if err != nil {
				t.Fatal(err)
			}
			releaseAllRecs(all)
			head := rec.NewSlice(0, k)
			like, err := pt.PartitionLike(mem, head, 7)
			if err != nil {
				t.Fatal(err)
			}
			want, err := partition(mem, head, []int{0, 2}, 7, false)
			if err != nil {
				t.Fatal(err)
			}
			for p := range 7 {
				if (like[p] == nil) != (want[p] == nil) {
					t.Fatalf("shared %v, %d rows, partition %d: like nil %v, want nil %v", shared, k, p, like[p] == nil, want[p] == nil)
				}
				if want[p] != nil {
					gbEqualRecords(t, fmt.Sprintf("shared %v, %d rows, partition %d", shared, k, p), like[p], want[p])
				}
			}
			releaseAllRecs(like)
			releaseAllRecs(want)
			head.Release()
		}
		ten, five := rec.NewSlice(0, 10), rec.NewSlice(0, 5)
		all, err := pt.Partition(mem, ten, []int{0}, 7)
		if err != nil {
			t.Fatal(err)
		}
		releaseAllRecs(all)
		if _, err := pt.PartitionLike(mem, rec, 7); err == nil {
			t.Fatal("PartitionLike of 2000 rows after a partitioning of 10: no error")
		}
		if _, err := pt.PartitionLike(mem, five, 3); err == nil {
			t.Fatal("PartitionLike in 3 partitions after a partitioning in 7: no error")
		}
		ten.Release()
		five.Release()
		rec.Release()
	}
}

func releaseAllRecs(recs []arrow.RecordBatch) {
	for _, r := range recs {
		if r != nil {
			r.Release()
		}
	}
}
