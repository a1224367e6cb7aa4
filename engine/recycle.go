package engine

import (
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// recycler is a memory.Allocator that keeps the buffers freed to it and
// hands them out again, zeroed, for allocations of about their size. One
// working table (whole.go) splits its state changes and output by
// partition every batch into buffers of the same sizes as the batch
// before; taken fresh from the Go heap, every page of them was a page
// fault on first write, which cost more than the copy itself. It holds at
// most recycleMaxBytes of free buffers; the rest, and everything after
// close, goes back to the allocator below. Safe for concurrent use.
//
// Only for records whose every reader is done with them, and keeps
// nothing pointing into them, once they are released: arrow-go's string
// values point into the buffers, and with the Go allocator such a string
// keeps its buffer alive, where here the buffer is written over.
type recycler struct {
	mem  memory.Allocator
	mu   sync.Mutex
	free [][]byte // as the allocator below returned them
	// out maps the first byte of each buffer handed out to the buffer
	// as the allocator below returned it (what Free gives back there).
	out    map[*byte][]byte
	held   int
	closed bool
}

const recycleMaxBytes = 256 << 20

func newRecycler(mem memory.Allocator) *recycler {
	return &recycler{mem: mem, out: map[*byte][]byte{}}
}

func (r *recycler) Allocate(size int) []byte {
	if size == 0 {
		return r.mem.Allocate(0)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.free) - 1; i >= 0; i-- {
		b := r.free[i]
		// Reuse a buffer at least as large and at most twice as large.
		if n := len(b); n >= size && n <= 2*size+4096 {
			r.free = append(r.free[:i], r.free[i+1:]...)
			r.held -= n
			r.out[&b[0]] = b
			// Capacity cut to size, as memory.GoAllocator's: arrow's
			// builders take the capacity for room they may write.
			b = b[:size:size]
			clear(b)
			return b
		}
	}
	b := r.mem.Allocate(size)
	r.out[&b[0]] = b
	return b
}

func (r *recycler) Reallocate(size int, b []byte) []byte {
	n := r.Allocate(size)
	copy(n, b)
	r.Free(b)
	return n
}

func (r *recycler) Free(b []byte) {
	if cap(b) == 0 {
		r.mem.Free(b)
		return
	}
	r.mu.Lock()
	orig, ok := r.out[&b[:1][0]]
	if !ok {
		r.mu.Unlock()
		r.mem.Free(b)
		return
	}
	delete(r.out, &orig[0])
	if r.closed || r.held+len(orig) > recycleMaxBytes {
		r.mu.Unlock()
		r.mem.Free(orig)
		return
	}
	r.free = append(r.free, orig)
	r.held += len(orig)
	r.mu.Unlock()
}

// close gives every held buffer back to the allocator below; what is
// freed later goes straight there.
func (r *recycler) close() {
	r.mu.Lock()
	free := r.free
	r.free, r.held, r.closed = nil, 0, true
	r.mu.Unlock()
	for _, b := range free {
		r.mem.Free(b)
	}
}
