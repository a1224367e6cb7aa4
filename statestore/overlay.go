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

// sortItem is a key to sort: its first 16 bytes as two big-endian words
// (zero padded; keys are prefix-free, so padding keeps bytes.Compare's
// order) and its index in the table.
type sortItem struct {
	p0, p1 uint64
	c      int32
}

// radixMin is the number of keys from which sorted sorts by radix.
const radixMin = 256

// sorted returns the changes in ascending key order.
func (t *keyTable) sorted() []change {
	items := make([]sortItem, len(t.changes))
	for c := range t.changes {
		var p [16]byte
		copy(p[:], t.key(c))
		items[c] = sortItem{p0: binary.BigEndian.Uint64(p[:8]), p1: binary.BigEndian.Uint64(p[8:]), c: int32(c)}
	}
	less := func(a, b sortItem) int {
		if c := cmp.Compare(a.p0, b.p0); c != 0 {
			return c
		}
		if c := cmp.Compare(a.p1, b.p1); c != 0 {
			return c
		}
		return bytes.Compare(t.key(int(a.c)), t.key(int(b.c)))
	}
	if len(items) < radixMin {
		slices.SortFunc(items, less)
	} else {
		// Radix sort by the first word, then a comparison sort of each
		// run of equal first words.
		radixSortP0(items)
		for i := 0; i < len(items); {
			j := i + 1
			for j < len(items) && items[j].p0 == items[i].p0 {
				j++
			}
			if j-i > 1 {
				slices.SortFunc(items[i:j], less)
			}
			i = j
		}
	}
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

// radixSortP0 sorts items by p0: least significant byte first, one stable
// counting pass per byte, skipping the bytes all items share.
func radixSortP0(items []sortItem) {
	var counts [8][256]int
	for _, it := range items {
		for b := 0; b < 8; b++ {
			counts[b][byte(it.p0>>(8*b))]++
		}
	}
	tmp := make([]sortItem, len(items))
	src, dst := items, tmp
	for b := 0; b < 8; b++ {
		cnt := &counts[b]
		if cnt[byte(items[0].p0>>(8*b))] == len(items) {
			continue // every item has this byte
		}
		pos := 0
		for v := range cnt {
			n := cnt[v]
			cnt[v] = pos
			pos += n
		}
		for _, it := range src {
			v := byte(it.p0 >> (8 * b))
			dst[cnt[v]] = it
			cnt[v]++
		}
		src, dst = dst, src
	}
	if &src[0] != &items[0] {
		copy(items, src)
	}
}
