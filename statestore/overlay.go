package statestore

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"hash/maphash"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
)

// change is the last change the deltas make to one key: an upsert (rec's
// row) or, with rec nil, a delete.
type change struct {
	key []byte // key encoding, in the overlay's arena
	rec arrow.RecordBatch
	row int
}

// overlay replays deltas (oldest first; within one delta, deletes before
// upserts) and returns each touched key's last change, in ascending key
// order.
//
// It walks the deltas backwards (newest first; within one, upserts from the
// last row, then deletes) and keeps the first change it meets per key,
// which is the last one a forward replay would keep. Keys live in one
// arena and are found through an open-addressing table of their hashes, so
// a key costs one encoding, one hash and (nearly always) one probe, and no
// allocation of its own.
func (s *Store) overlay(deltas []*decodedFile) []change {
	n := 0
	for _, d := range deltas {
		for _, sec := range d.sections {
			for _, r := range sec.recs {
				n = max(n, int(r.NumRows())) // distinct keys are at least the largest delta's
			}
		}
	}
	t := newKeyTable(n)
	var buf []byte
	for di := len(deltas) - 1; di >= 0; di-- {
		d := deltas[di]
		for _, part := range []int{0, 1} { // upserts, then deletes
			recs := d.sections[part].recs
			for ri := len(recs) - 1; ri >= 0; ri-- {
				r := recs[ri]
				enc := newKeyEncoder(r, s.nkeys)
				src := int32(-1) // a delete
				if part == 0 {
					src = int32(len(t.recs))
					t.recs = append(t.recs, r)
				}
				for i := int(r.NumRows()) - 1; i >= 0; i-- {
					buf = enc.encode(buf[:0], i)
					t.insert(buf, src, int32(i))
				}
			}
		}
	}
	return t.sorted()
}

// keyTable keeps the first change inserted for each key. Keys are stored
// back to back in arena (key c is arena[ends[c-1]:ends[c]]); a slot holds
// a key's hash tag (high 32 bits) and its index + 1 (0: empty), so a probe
// that meets another key rarely reads that key's bytes.
type keyTable struct {
	seed    maphash.Seed
	arena   []byte
	ends    []int
	changes []source // per key, pointer-free: the GC never scans it
	recs    []arrow.RecordBatch
	slots   []uint64
	mask    uint64
}

// source is where a key's change is: row of recs[rec], or a delete when
// rec is -1.
type source struct {
	rec, row int32
}

func newKeyTable(hint int) *keyTable {
	size := 16
	for size < 2*hint {
		size <<= 1
	}
	return &keyTable{
		seed:    maphash.MakeSeed(), // placement only: the output is sorted by key
		ends:    make([]int, 0, hint),
		changes: make([]source, 0, hint),
		slots:   make([]uint64, size),
		mask:    uint64(size - 1),
	}
}

func (t *keyTable) key(c int) []byte {
	start := 0
	if c > 0 {
		start = t.ends[c-1]
	}
	return t.arena[start:t.ends[c]:t.ends[c]]
}

// insert records (rec, row) as key's change unless key has one already.
func (t *keyTable) insert(key []byte, rec, row int32) {
	h := maphash.Bytes(t.seed, key)
	tag := h &^ (1<<32 - 1)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		sl := t.slots[i]
		if sl == 0 {
			break
		}
		if sl&^(1<<32-1) == tag && bytes.Equal(t.key(int(uint32(sl))-1), key) {
			return
		}
	}
	if 2*(len(t.changes)+1) > len(t.slots) {
		t.grow()
	}
	t.arena = append(t.arena, key...)
	t.ends = append(t.ends, len(t.arena))
	t.changes = append(t.changes, source{rec: rec, row: row})
	t.place(h&t.mask, tag|uint64(len(t.changes)))
}

// place puts slot value sl in the first free slot from home on.
func (t *keyTable) place(home, sl uint64) {
	i := home
	for t.slots[i] != 0 {
		i = (i + 1) & t.mask
	}
	t.slots[i] = sl
}

func (t *keyTable) grow() {
	old := t.slots
	t.slots = make([]uint64, 2*len(old))
	t.mask = uint64(len(t.slots) - 1)
	for _, sl := range old {
		if sl != 0 {
			// Slots keep only the hash's high half: rehash the key.
			t.place(maphash.Bytes(t.seed, t.key(int(uint32(sl))-1))&t.mask, sl)
		}
	}
}

// sorted returns the changes in ascending key order.
func (t *keyTable) sorted() []change {
	// Order by the first 16 bytes as two big-endian words, then the rest:
	// keys are prefix-free, so zero padding keeps bytes.Compare's order.
	type item struct {
		p0, p1 uint64
		c      int32
	}
	items := make([]item, len(t.changes))
	for c := range t.changes {
		var p [16]byte
		copy(p[:], t.key(c))
		items[c] = item{p0: binary.BigEndian.Uint64(p[:8]), p1: binary.BigEndian.Uint64(p[8:]), c: int32(c)}
	}
	slices.SortFunc(items, func(a, b item) int {
		if c := cmp.Compare(a.p0, b.p0); c != 0 {
			return c
		}
		if c := cmp.Compare(a.p1, b.p1); c != 0 {
			return c
		}
		return bytes.Compare(t.key(int(a.c)), t.key(int(b.c)))
	})
	out := make([]change, len(items))
	for i, it := range items {
		src := t.changes[it.c]
		out[i] = change{key: t.key(int(it.c)), row: int(src.row)}
		if src.rec >= 0 {
			out[i].rec = t.recs[src.rec]
		}
	}
	return out
}
