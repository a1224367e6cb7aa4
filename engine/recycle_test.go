package engine

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestRecycler: buffers come back zeroed, with their capacity cut to the
// size asked (arrow's builders write up to the capacity), are reused for
// sizes up to twice smaller, and everything held or freed after close goes
// back to the allocator below.
func TestRecycler(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	r := newRecycler(mem)
	a := r.Allocate(1000)
	if len(a) != 1000 || cap(a) != 1000 {
		t.Fatalf("len %d cap %d, want 1000 1000", len(a), cap(a))
	}
	for i := range a {
		a[i] = 7
	}
	r.Free(a)
	b := r.Allocate(600)
	if len(b) != 600 || cap(b) != 600 || &b[0] != &a[0] {
		t.Fatalf("a freed 1000-byte buffer is not reused for 600 bytes (len %d cap %d)", len(b), cap(b))
	}
	for i, x := range b {
		if x != 0 {
			t.Fatalf("byte %d of a reused buffer is %d, want 0", i, x)
		}
	}
	c := r.Allocate(100) // too small for b's buffer: a new one
	r.Free(b)
	d := r.Allocate(10_000)
	if &d[0] == &a[0] {
		t.Fatal("a 1000-byte buffer handed out for 10000 bytes")
	}
	e := r.Reallocate(20_000, d)
	if len(e) != 20_000 {
		t.Fatalf("Reallocate: len %d", len(e))
	}
	r.Free(c)
	r.close()
	r.Free(e) // after close: straight to the allocator below
	if n := r.Allocate(0); len(n) != 0 {
		t.Fatal("Allocate(0)")
	}
}
