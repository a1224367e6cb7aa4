package kernel

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cespare/xxhash/v2"
)

// bytesKeys is the table of one variable-width key column (the key is the
// value's bytes; the null key is a group of its own) or of several key
// columns (the key is the row encoding of keycodec.go, nulls included).
//
// Row encoding, per key column in order: one byte 0 (null) or 1 (valid),
// then for a valid value its bytes: fixed-width types their little-endian
// bits (floats normalised like u64Keys, bool one byte 0/1, decimal128 16
// bytes), variable-width types a 4-byte length and the bytes. The encoding
// lives in memory only.
type bytesKeys struct {
	fields  []arrow.Field
	single  bool
	slots   []strSlot
	shift   uint
	arena   []byte
	offs    []int64 // group g's key is arena[offs[g]:offs[g+1]]
	nullGid int
	nullSeq uint32
	// scratch of the row encoding
	rowOffs []int64
	pos     []int64
	buf     []byte
	touched uint64 // sum of the words loaded ahead (without prefetch), kept so the loads stay
	// pipelined: probe through the load-ahead pipeline at any table size;
	// direct: probe each row as it is read (tests; see strDirectSlots).
	pipelined, direct bool
}

// strSlot is a slot of bytesKeys: two words describing its key (strKey),
// its group id + 1 (0: empty slot) and the seq of the last find that saw
// it. A key of at most 15 bytes is held whole in the words, length
// included, so its lookup compares two words and touches one cache line.
// For a longer key the words are its 64-bit hash and, in w1, a marker, its
// length and its place in the arena, so its lookup compares hash and length
// and then reads the arena once, not the offsets first.
type strSlot struct {
	w0, w1 uint64
	gid    uint32
	seq    uint32
}

// strInline is the longest key a strSlot holds whole. A longer key's w1 is
// strLong in the top byte, then its length (strLenBits bits, strLenMax if
// that large or larger), then its arena offset (strOffBits bits, strOffMax
// if that far or farther); at either maximum the arena is found through
// the offsets instead.
const (
	strInline  = 15
	strLong    = 0xff
	strOffBits = 36
	strLenBits = 56 - strOffBits
	strOffMax  = 1<<strOffBits - 1
	strLenMax  = 1<<strLenBits - 1
)

// strWords packs the key data[o:e] into two words: bytes 0-7 little-endian
// in w0, bytes 8-14 in the low 7 bytes of w1, zero-padded, and in w1's top
// byte the length (0-15) or strLong. Two keys of at most 15 bytes are equal
// exactly when their words are. It reads 16 bytes at o when the buffer has
// them and masks off what lies past e.
func strWords(data []byte, o, e int) (uint64, uint64) {
	if o+16 > len(data) {
		return strWordsTail(data, o, e)
	}
	return strPack(binary.LittleEndian.Uint64(data[o:]), binary.LittleEndian.Uint64(data[o+8:]), e-o)
}

func strWordsTail(data []byte, o, e int) (uint64, uint64) {
	var b [16]byte
	copy(b[:], data[o:e])
	return strPack(binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:]), e-o)
}

// strPack masks the 16 bytes w0, w1 read at a key of n bytes (see strWords).
func strPack(w0, w1 uint64, n int) (uint64, uint64) {
	if n > strInline {
		return w0, w1&(1<<56-1) | strLong<<56
	}
	// A shift by 64 or more gives 0: none of that word's bytes.
	w0 &= ^uint64(0) >> uint(64-8*min(n, 8))
	w1 &= ^uint64(0) >> uint(64-8*max(n-8, 0))
	return w0, w1 | uint64(n)<<56
}

// strKey returns the words a slot holds for the key data[o:e] (its arena
// offset left 0) and the table hash. A key of at most 15 bytes hashes
// from its words (fmix64 is a bijection, so keys of up to 8 bytes and one
// length never collide); a longer one by xxhash64 of its bytes, which is
// then its w0. The hash stays in memory: it is not HashRows's.
func strKey(data []byte, o, e int) (w0, w1, h uint64) {
	w0, w1 = strWords(data, o, e)
	if w1>>56 != strLong {
		return w0, w1, hashFmix64(w0 ^ bits.RotateLeft64(w1*hashMul, 31))
	}
	h = xxhash.Sum64(data[o:e])
	return h, strLongWord(e - o), h
}

// strLongWord is w1 of a key of n > 15 bytes, arena offset 0.
func strLongWord(n int) uint64 {
	return strLong<<56 | uint64(min(n, strLenMax))<<strOffBits
}

// strCompareMask is the part of w1 a lookup compares: all of it for a
// short key, all but the arena offset for a long one (top bit set).
func strCompareMask(w1 uint64) uint64 {
	return ^(strOffMax * (w1 >> 63))
}

// strSlotHash is the hash of the key of a filled slot.
func strSlotHash(s *strSlot) uint64 {
	if s.w1>>56 != strLong {
		return hashFmix64(s.w0 ^ bits.RotateLeft64(s.w1*hashMul, 31))
	}
	return s.w0
}

// longKey is the arena bytes of the long key of slot s, group g.
func (t *bytesKeys) longKey(s *strSlot, g uint32) []byte {
	off, n := s.w1&strOffMax, (s.w1>>strOffBits)&strLenMax
	if off == strOffMax || n == strLenMax {
		return t.arena[t.offs[g]:t.offs[g+1]]
	}
	return t.arena[off : off+n]
}

// fill sets slot s to a new key of words w0, w1 whose bytes start at arena
// offset off.
func (s *strSlot) fill(w0, w1 uint64, off int, gid, seq uint32) {
	if w1>>56 == strLong {
		w1 |= min(uint64(off), strOffMax)
	}
	*s = strSlot{w0: w0, w1: w1, gid: gid, seq: seq}
}

func (t *bytesKeys) len() int {
	if len(t.offs) == 0 {
		return 0
	}
	return len(t.offs) - 1
}

func (t *bytesKeys) memoryBytes() int64 {
	return aggSize(t.slots) + aggSize(t.arena) + aggSize(t.offs) + aggSize(t.rowOffs) + aggSize(t.pos) + aggSize(t.buf)
}

func (t *bytesKeys) find(cols []arrow.Array, gids []uint32, seq uint32, groups []uint32) []uint32 {
	if t.slots == nil {
		t.resize(minTableSlots)
		t.offs = append(t.offs[:0], 0)
	}
	if t.single {
		c := cols[0]
		bm, off := gbBitmap(c)
		switch c.DataType().ID() {
		case arrow.STRING, arrow.BINARY:
			return bytesFind(t, gbVarData(c), gbOffsets[int32](c), bm, off, gids, seq, groups)
		default:
			return bytesFind(t, gbVarData(c), gbOffsets[int64](c), bm, off, gids, seq, groups)
		}
	}
	t.encode(cols)
	return bytesFind(t, t.buf, t.rowOffs, nil, 0, gids, seq, groups)
}

// nullGroup is the group of the null key, and whether seq sees it first.
func (t *bytesKeys) nullGroup(seq uint32) (uint32, bool) {
	if t.nullGid < 0 {
		t.nullGid = t.len()
		t.offs = append(t.offs, int64(len(t.arena)))
	}
	fresh := t.nullSeq != seq
	t.nullSeq = seq
	return uint32(t.nullGid), fresh
}

func (t *bytesKeys) clearSeq() {
	for i := range t.slots {
		t.slots[i].seq = 0
	}
	t.nullSeq = 0
}

// bytesKeys's probe loop has the same two forms as u64Keys's, side by
// side for the same reason (see the comment above u64DirectSlots).
// bytesFind computes the slots of the next probeBlock rows before it
// probes the current ones and asks for them ahead: with prefetchStrSlots
// (amd64: PREFETCHT0, which retires at once, where a plain load held the
// reorder buffer until its miss resolved) the misses of a block overlap
// at every table size, measured 2-3x the rows per CPU-second of the
// loaded-ahead form at 100k groups on a machine with slow memory and
// 5-25% at 1k-12.5k groups (issue 21, README performance item 12).
// Where the ahead request is a plain load (other architectures), tables
// of up to strDirectSlots take bytesFindDirect, which probes each row as
// it reads it. The pipelined and direct knobs make either run at any
// size in tests (TestGroupByRandomAgainstMap).

// strDirectSlots: without prefetchStrSlots, a table of at most this many
// slots (768 KiB) stays in cache, so bytesFindDirect probes each row as it
// reads it, without the load-ahead pipeline.
const strDirectSlots = 1 << 15

// strLimit is tableLimit for bytesKeys: half the slots up to
// strHalfSlots, 7/8 above (memory first for tables of millions of
// groups). At a load of 7/8 a row probes 2-3 slots on average, each a
// compare that mispredicts; at 1/2, 1.3: measured +5-25% rows per
// CPU-second at 1k-100k groups, for 48 bytes of slots a group instead of
// 27.
func strLimit(n int) int {
	if n <= strHalfSlots {
		return n / 2
	}
	return tableLimit(n)
}

// strHalfSlots is the largest table (96 MiB of slots, 2M groups) that
// strLimit keeps half full.
const strHalfSlots = 1 << 22

// strRow is a row's key as the probe loop needs it: its packed words, its
// hash, and where its bytes are.
type strRow struct {
	w0, w1, h uint64
	o, e      int
}

// strLoadBlock fills blk with the keys of rows [start, end) and asks for
// their first slots: prefetchStrSlots where there is a prefetch, else a
// load of each (the sum of the words read is returned so the loads are
// kept).
func strLoadBlock[O int32 | int64](data []byte, offs []O, start, end int, blk *[probeBlock]strRow, slots []strSlot, shift uint) uint64 {
	touch := uint64(0)
	var pos [probeBlock]uint64
	offs = offs[start : end+1]
	for j := range end - start {
		o, e := int(offs[j]), int(offs[j+1])
		w0, w1 := strWords(data, o, e)
		var h uint64
		if w1>>56 != strLong {
			h = hashFmix64(w0 ^ bits.RotateLeft64(w1*hashMul, 31))
		} else {
			// as strKey
			h = xxhash.Sum64(data[o:e])
			w0, w1 = h, strLongWord(e-o)
		}
		// Field by field: a composite literal is built on the stack and
		// copied with 16-byte moves over its 8-byte stores, which stalls
		// store forwarding (measured: a fifth of the probe's time).
		r := &blk[j]
		r.w0, r.w1, r.h, r.o, r.e = w0, w1, h, o, e
		if hasPrefetch {
			pos[j] = h >> shift
		} else {
			touch += slots[h>>shift].w0
		}
	}
	if hasPrefetch && end > start {
		prefetchStrSlots(&slots[0], &pos[0], end-start)
	}
	return touch
}

// bytesFind is the hot loop of byte keys: row i's key is data[offs[i]:offs[i+1]].
func bytesFind[O int32 | int64](t *bytesKeys, data []byte, offs []O, bm []byte, off int, gids []uint32, seq uint32, groups []uint32) []uint32 {
	direct := !hasPrefetch && len(t.slots) <= strDirectSlots
	if (direct || t.direct) && !t.pipelined {
		return bytesFindDirect(t, data, offs, bm, off, gids, seq, groups)
	}
	n := len(offs) - 1
	gids = gids[:n]
	groups = slices.Grow(groups, n)
	out := groups[:cap(groups)]
	ng := len(groups)
	slots, shift := t.slots, t.shift
	mask := uint64(len(slots) - 1)
	limit := strLimit(len(slots))
	track := seq != 0
	// Pipelined like u64Find: read the keys of block b+1 and load their
	// slots, then probe block b.
	var rows [2][probeBlock]strRow
	touch := strLoadBlock(data, offs, 0, min(probeBlock, n), &rows[0], slots, shift)
	cur := 0
	for base := 0; base < n; base += probeBlock {
		end := min(base+probeBlock, n)
		if end < n {
			touch += strLoadBlock(data, offs, end, min(end+probeBlock, n), &rows[cur^1], slots, shift)
		}
		blk := rows[cur][:end-base]
		cur ^= 1
		for j := range blk {
			i := base + j
			if bm != nil && !bitutil.BitIsSet(bm, off+i) {
				g, fresh := t.nullGroup(seq)
				gids[i] = g
				out[ng] = g
				if fresh && track {
					ng++
				}
				continue
			}
			r := &blk[j]
			cmp := strCompareMask(r.w1)
			p := r.h >> shift
			for {
				s := &slots[p]
				if s.w0 == r.w0 && s.w1&cmp == r.w1 && s.gid != 0 {
					g := s.gid - 1
					if r.w1>>56 != strLong || bytes.Equal(t.longKey(s, g), data[r.o:r.e]) {
						gids[i] = g
						if track {
							fresh := uint64(s.seq ^ seq)
							s.seq = seq
							out[ng] = g
							ng += int((fresh | -fresh) >> 63)
						}
						break
					}
				}
				if s.gid == 0 {
					if t.len() >= limit {
						t.resize(2 * len(slots))
						slots, shift = t.slots, t.shift
						mask = uint64(len(slots) - 1)
						limit = strLimit(len(slots))
						p = r.h >> shift
						continue
					}
					g := uint32(t.len())
					s.fill(r.w0, r.w1, len(t.arena), g+1, seq)
					t.arena = append(t.arena, data[r.o:r.e]...)
					t.offs = append(t.offs, int64(len(t.arena)))
					gids[i] = g
					out[ng] = g
					if track {
						ng++
					}
					break
				}
				p = (p + 1) & mask
			}
		}
	}
	t.touched += touch
	return out[:ng]
}

// bytesFindDirect is bytesFind without the pipeline, for small tables.
func bytesFindDirect[O int32 | int64](t *bytesKeys, data []byte, offs []O, bm []byte, off int, gids []uint32, seq uint32, groups []uint32) []uint32 {
	n := len(offs) - 1
	gids = gids[:n]
	groups = slices.Grow(groups, n)
	out := groups[:cap(groups)]
	ng := len(groups)
	slots, shift := t.slots, t.shift
	mask := uint64(len(slots) - 1)
	limit := strLimit(len(slots))
	track := seq != 0
	for i := range n {
		if bm != nil && !bitutil.BitIsSet(bm, off+i) {
			g, fresh := t.nullGroup(seq)
			gids[i] = g
			out[ng] = g
			if fresh && track {
				ng++
			}
			continue
		}
		o, e := int(offs[i]), int(offs[i+1])
		w0, w1 := strWords(data, o, e)
		var h uint64
		if w1>>56 != strLong {
			h = hashFmix64(w0 ^ bits.RotateLeft64(w1*hashMul, 31))
		} else {
			h = xxhash.Sum64(data[o:e])
			w0, w1 = h, strLongWord(e-o)
		}
		cmp := strCompareMask(w1)
		p := h >> shift
		for {
			s := &slots[p]
			if s.w0 == w0 && s.w1&cmp == w1 && s.gid != 0 {
				g := s.gid - 1
				if w1>>56 != strLong || bytes.Equal(t.longKey(s, g), data[o:e]) {
					gids[i] = g
					if track {
						fresh := uint64(s.seq ^ seq)
						s.seq = seq
						out[ng] = g
						ng += int((fresh | -fresh) >> 63)
					}
					break
				}
			}
			if s.gid == 0 {
				if t.len() >= limit {
					t.resize(2 * len(slots))
					slots, shift = t.slots, t.shift
					mask = uint64(len(slots) - 1)
					limit = strLimit(len(slots))
					p = h >> shift
					continue
				}
				g := uint32(t.len())
				s.fill(w0, w1, len(t.arena), g+1, seq)
				t.arena = append(t.arena, data[o:e]...)
				t.offs = append(t.offs, int64(len(t.arena)))
				gids[i] = g
				out[ng] = g
				if track {
					ng++
				}
				break
			}
			p = (p + 1) & mask
		}
	}
	return out[:ng]
}

// resize moves the slots to a table of the given power-of-two size.
func (t *bytesKeys) resize(n int) {
	old := t.slots
	t.slots = make([]strSlot, n)
	t.shift = tableShift(n)
	mask := uint64(n - 1)
	for i := range old {
		s := &old[i]
		if s.gid == 0 {
			continue
		}
		p := strSlotHash(s) >> t.shift
		for t.slots[p].gid != 0 {
			p = (p + 1) & mask
		}
		t.slots[p] = *s
	}
}

// rebuild makes the slots anew from the keys, at the given size.
func (t *bytesKeys) rebuild(n int) {
	t.slots = make([]strSlot, n)
	t.shift = tableShift(n)
	mask := uint64(n - 1)
	for g := range t.len() {
		if g == t.nullGid {
			continue
		}
		o, e := int(t.offs[g]), int(t.offs[g+1])
		w0, w1, h := strKey(t.arena, o, e)
		p := h >> t.shift
		for t.slots[p].gid != 0 {
			p = (p + 1) & mask
		}
		t.slots[p].fill(w0, w1, o, uint32(g)+1, 0)
	}
}

func (t *bytesKeys) compact(keep []bool) {
	n := t.len()
	w, a := 0, int64(0)
	newNull := -1
	for g := range n {
		if !keep[g] {
			continue
		}
		if g == t.nullGid {
			newNull = w
		}
		start, end := t.offs[g], t.offs[g+1]
		copy(t.arena[a:], t.arena[start:end])
		t.offs[w] = a
		a += end - start
		w++
	}
	if len(t.offs) > 0 {
		t.offs[w] = a
		t.offs = t.offs[:w+1]
	}
	t.arena = t.arena[:a]
	t.nullGid = newNull
	slots := minTableSlots
	for w >= strLimit(slots) {
		slots *= 2
	}
	t.rebuild(slots)
}

func (t *bytesKeys) reset() {
	clear(t.slots)
	t.arena = t.arena[:0]
	if t.slots != nil {
		t.offs = append(t.offs[:0], 0)
	}
	t.nullGid, t.nullSeq = -1, 0
}

func (t *bytesKeys) arrays(mem memory.Allocator, idx []uint32) []arrow.Array {
	n := aggRows(idx, t.len())
	if t.single {
		if t.fields[0].Type.ID() == arrow.STRING || t.fields[0].Type.ID() == arrow.BINARY {
			return []arrow.Array{bytesKeysArray[int32](t, mem, idx, n)}
		}
		return []arrow.Array{bytesKeysArray[int64](t, mem, idx, n)}
	}
	pos := make([]int64, n)
	for j := range n {
		pos[j] = t.offs[aggRow(idx, j)]
	}
	out := make([]arrow.Array, len(t.fields))
	for ci, f := range t.fields {
		out[ci] = keyDecodeColumn(mem, f.Type, t.arena, pos)
	}
	return out
}

// bytesKeysArray is arrays of a single string or binary key column (O the
// type's offsets): one pass reads each row's place in the arena (group
// ids come in any order, so each read may miss the cache), one copies
// the bytes, and a validity bitmap is built only when the null key is
// among the rows. A generic builder called back per row for each of the
// three took a tenth of a whole-state commit's CPU.
func bytesKeysArray[O int32 | int64](t *bytesKeys, mem memory.Allocator, idx []uint32, n int) arrow.Array {
	var zero O
	ob := memory.NewResizableBuffer(mem)
	ob.Resize((n + 1) * int(unsafe.Sizeof(zero)))
	offs := unsafe.Slice((*O)(unsafe.Pointer(unsafe.SliceData(ob.Bytes()))), n+1)
	from := make([]int64, n)
	src := t.offs
	var total int64
	nulls := 0
	for j := range n {
		g := aggRow(idx, j)
		if g == t.nullGid {
			nulls++
		}
		offs[j] = O(total)
		from[j] = src[g]
		total += src[g+1] - src[g]
	}
	offs[n] = O(total)
	db := memory.NewResizableBuffer(mem)
	db.Resize(int(total))
	data, arena := db.Bytes(), t.arena
	for j := range n {
		lo, hi := int64(offs[j]), int64(offs[j+1])
		copy(data[lo:hi], arena[from[j]:from[j]+hi-lo])
	}
	var nb *memory.Buffer
	if nulls > 0 {
		nb, _ = aggValidity(mem, n, func(j int) bool { return aggRow(idx, j) != t.nullGid })
	}
	return aggFinish(t.fields[0].Type, n, []*memory.Buffer{nb, ob, db}, nulls)
}
