package kernel

import (
	"math"
	"slices"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// u64Slot holds a key, its group id + 1 (0: empty slot) and the seq of the
// last tracking find that saw it (0 after an untracked one: keytable.go).
type u64Slot struct {
	key uint64
	gid uint32
	seq uint32
}

// u64Keys is the table of one fixed-width key column of at most 8 bytes.
// The key is the value's bits zero-extended to 64 (floats normalised: -0 is
// +0, every NaN one NaN; bools 0/1), so equal values and equal keys coincide.
type u64Keys struct {
	dt      arrow.DataType
	width   int
	slots   []u64Slot
	shift   uint
	keys    vec[uint64] // by group id; 0 for the null group
	nullGid int         // group of the null key, -1 if none
	nullSeq uint32
	scratch []uint64
	touched uint64 // sum of the keys loaded ahead, kept so the loads stay
	// pipelined: probe through the load-ahead pipeline at any table size;
	// direct: probe each row as it is read at any size (tests, so both
	// loops run on every architecture; see u64DirectSlots).
	pipelined, direct bool
	// general: u64Find's general loop even where u64FindGids would run;
	// probeGo: u64ProbeGo even where u64ProbeAsm would run (tests, so
	// that all give the same groups).
	general, probeGo bool
}

func u64Slot0(k uint64, shift uint) uint64 {
	return ((k ^ k>>29) * hashMul) >> shift
}

func (t *u64Keys) len() int { return t.keys.len() }

func (t *u64Keys) memoryBytes() int64 {
	return aggSize(t.slots) + t.keys.memoryBytes() + aggSize(t.scratch)
}

func (t *u64Keys) find(cols []arrow.Array, gids []uint32, seq uint32, groups []uint32) []uint32 {
	c := cols[0]
	bm, off := gbBitmap(c)
	switch c.DataType().ID() {
	case arrow.FLOAT32:
		vals := gbValues[float32](c)
		s := t.scratchN(len(vals))
		for i, v := range vals {
			switch {
			case v == 0:
				s[i] = 0
			case v != v:
				s[i] = 0x7fc00001
			default:
				s[i] = uint64(math.Float32bits(v))
			}
		}
		return u64Find(t, s, bm, off, gids, seq, groups)
	case arrow.FLOAT64:
		vals := gbValues[float64](c)
		s := t.scratchN(len(vals))
		for i, v := range vals {
			s[i] = hashFloat64Bits(v)
		}
		return u64Find(t, s, bm, off, gids, seq, groups)
	case arrow.BOOL:
		b := c.(*array.Boolean)
		s := t.scratchN(c.Len())
		for i := range s {
			s[i] = 0
			if b.Value(i) {
				s[i] = 1
			}
		}
		return u64Find(t, s, bm, off, gids, seq, groups)
	default:
		switch t.width {
		case 1:
			return u64Find(t, gbValues[uint8](c), bm, off, gids, seq, groups)
		case 2:
			return u64Find(t, gbValues[uint16](c), bm, off, gids, seq, groups)
		case 4:
			return u64Find(t, gbValues[uint32](c), bm, off, gids, seq, groups)
		default:
			return u64Find(t, gbValues[uint64](c), bm, off, gids, seq, groups)
		}
	}
}

func (t *u64Keys) scratchN(n int) []uint64 {
	if cap(t.scratch) < n {
		t.scratch = make([]uint64, n)
	}
	return t.scratch[:n]
}

// nullGroup is the group of the null key, and whether seq sees it first.
func (t *u64Keys) nullGroup(seq uint32) (uint32, bool) {
	if t.nullGid < 0 {
		t.nullGid = t.keys.len()
		t.keys.push(0)
	}
	fresh := t.nullSeq != seq && seq != 0
	t.nullSeq = seq
	return uint32(t.nullGid), fresh
}

func (t *u64Keys) clearSeq() {
	for i := range t.slots {
		t.slots[i].seq = 0
	}
	t.nullSeq = 0
}

// The probe loop of u64Keys comes in two forms, side by side on purpose.
// u64FindDirect probes each row as it reads it. u64Find computes the
// slots of the next probeBlock rows before it probes the current ones and
// asks for them ahead: with prefetchSlots (amd64: PREFETCHT0, which
// retires at once) the misses of a block overlap even for a table in the
// last-level cache, measured 10-45% more rows per CPU-second than the
// direct loop at 100k groups (issue 21); where the ahead-request is a
// plain load (other architectures) it pays only past the cache, so tables
// of up to u64DirectSlots take the direct loop there (7-11% faster at
// 100k groups, 17% at 12.5k, when it was measured). Both must give the
// same groups in the same order: the pipelined and direct knobs make
// either run at any size in tests (TestGroupByMoreGroupsThanAChunk,
// TestGroupByRandomAgainstMap). u64Limit, the load at which the table
// doubles, keeps the split by size. A third form, u64FindGids, takes
// the common case on amd64 (no nulls, no first-sight tracking: see
// GroupBy.track) with an assembly probe; it measured +40% rows per
// CPU-second over u64Find at 100k groups, +55-65% at 12.5k (issue 21,
// README pass 6). The general, probeGo and track knobs make every form
// run on the same data in TestGroupByRandomAgainstMap.

// u64DirectSlots: up to this many slots (4 MiB, a table that stays in the
// last-level cache), on architectures without prefetchSlots, u64FindDirect
// probes each row as it reads it, without the load-ahead pipeline, which
// pays off there only for tables far larger than the cache (measured:
// 7-11% faster at 100k groups, 17% at 12.5k).
const u64DirectSlots = 1 << 18

// u64Limit is tableLimit for u64Keys: half the slots while the table is
// probed directly (up to u64DirectSlots), 7/8 above. Keys spread over the
// int64 range (hashed or snowflake ids) probe 2.6 slots on average at a
// load of 3/4 and 1.3 at 3/8; the fewer probes and mispredicted compares
// outweigh the doubled table (measured: +30-40% rows/s at 100k groups,
// a 4 MiB table instead of 2). Large tables keep 7/8 for memory.
func u64Limit(n int) int {
	if n <= u64DirectSlots {
		return n / 2
	}
	return tableLimit(n)
}

// u64Find is the hot loop of single fixed-width keys: with prefetchSlots
// every table goes through the pipeline; without, tables of up to
// u64DirectSlots go to u64FindDirect.
func u64Find[T uint8 | uint16 | uint32 | uint64](t *u64Keys, vals []T, bm []byte, off int, gids []uint32, seq uint32, groups []uint32) []uint32 {
	if t.slots == nil {
		t.resize(minTableSlots)
	}
	direct := !hasPrefetch && len(t.slots) <= u64DirectSlots
	if (direct || t.direct) && !t.pipelined {
		return u64FindDirect(t, vals, bm, off, gids, seq, groups)
	}
	if seq == 0 && bm == nil && hasPrefetch && !t.general {
		u64FindGids(t, vals, gids)
		return groups
	}
	n := len(vals)
	gids = gids[:n]
	// Every row adds at most one group: out has room, written without
	// bounds growth, ng advanced without a branch.
	groups = slices.Grow(groups, n)
	out := groups[:cap(groups)]
	ng := len(groups)
	slots, shift := t.slots, t.shift
	mask := uint64(len(slots) - 1)
	limit := u64Limit(len(slots))
	track := seq != 0
	// Software pipeline: the slots of block b+1 are loaded (touch) before
	// block b is probed, so the loads are in flight while b resolves and
	// a mispredicted compare in b does not cancel them.
	var pos [2][probeBlock]uint64
	touch := uint64(0)
	for j, v := range vals[:min(probeBlock, n)] {
		p := u64Slot0(uint64(v), shift)
		pos[0][j] = p
		if !hasPrefetch {
			touch += slots[p].key
		}
	}
	if hasPrefetch {
		prefetchSlots(&slots[0], &pos[0][0], min(probeBlock, n))
	}
	cur := 0
	for base := 0; base < n; base += probeBlock {
		if nb := base + probeBlock; nb < n {
			next := &pos[cur^1]
			nv := vals[nb:min(nb+probeBlock, n)]
			for j, v := range nv {
				p := u64Slot0(uint64(v), shift)
				next[j] = p
				if !hasPrefetch {
					touch += slots[p].key
				}
			}
			if hasPrefetch {
				prefetchSlots(&slots[0], &next[0], len(nv))
			}
		}
		blk := vals[base:min(base+probeBlock, n)]
		cp := &pos[cur]
		cur ^= 1
		for j, v := range blk {
			i := base + j
			if bm != nil && !bitutil.BitIsSet(bm, off+i) {
				g, fresh := t.nullGroup(seq)
				gids[i] = g
				out[ng] = g
				if fresh {
					ng++
				}
				continue
			}
			k := uint64(v)
			p := cp[j]
			for {
				s := &slots[p]
				if s.key == k && s.gid != 0 {
					g := s.gid - 1
					gids[i] = g
					if track {
						fresh := uint64(s.seq ^ seq)
						s.seq = seq
						out[ng] = g
						ng += int((fresh | -fresh) >> 63)
					}
					break
				}
				if s.gid == 0 {
					if t.keys.len() >= limit {
						t.resize(2 * len(slots))
						slots, shift = t.slots, t.shift
						mask = uint64(len(slots) - 1)
						limit = u64Limit(len(slots))
						// Positions computed for the old size are stale.
						for jj := j; jj < len(blk); jj++ {
							cp[jj] = u64Slot0(uint64(blk[jj]), shift)
						}
						if nb := base + probeBlock; nb < n {
							for jj, v := range vals[nb:min(nb+probeBlock, n)] {
								pos[cur][jj] = u64Slot0(uint64(v), shift)
							}
						}
						p = cp[j]
						continue
					}
					g := uint32(t.keys.len())
					t.keys.push(k)
					s.key, s.gid, s.seq = k, g+1, seq
					gids[i] = g
					if track {
						out[ng] = g
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

// u64FindGids is u64Find's loop for the common case, cut down to what it
// needs: no null in the column and no first-sight tracking (seq 0), so a
// hit reads its slot and writes the row's gid, nothing else. The probe
// loop (u64Probe) makes no call and keeps every value in a register: on
// amd64 with 8-byte keys it is u64ProbeAsm, which prefetches the slot of
// the row u64Ahead rows ahead as it probes each row (the hash is computed
// twice instead of being stored); elsewhere u64ProbeGo. It returns at a
// key it does not find; this function adds the group (resizing first when
// the table is at its limit) and resumes it at the next row. It gives the
// same gids in the same order as u64Find (the general knob forces u64Find
// in tests, probeGo the Go probe).
func u64FindGids[T uint8 | uint16 | uint32 | uint64](t *u64Keys, vals []T, gids []uint32) {
	n := len(vals)
	gids = gids[:n]
	ahead := 0 // rows from i whose slots are prefetched already
	for i := 0; i < n; {
		var p uint64
		i, p = u64Probe(t, vals, gids, i, ahead)
		if i == n {
			break
		}
		if t.keys.len() >= u64Limit(len(t.slots)) {
			t.resize(2 * len(t.slots))
			ahead = 0
			continue
		}
		k := uint64(vals[i])
		g := uint32(t.keys.len())
		t.keys.push(k)
		t.slots[p] = u64Slot{key: k, gid: g + 1}
		gids[i] = g
		i++
		ahead = u64Ahead
	}
}

// u64Ahead is how many rows ahead u64ProbeAsm prefetches a slot: at
// 15-20 ns a row, a little more than the latency of the last-level cache.
const u64Ahead = 16

// u64Probe probes rows i… of vals, writing their gids, until the end (it
// returns len(vals)) or a row whose key is not in the table: it returns
// that row and the empty slot where its key goes. The slots of rows
// [i, i+ahead) have been prefetched.
func u64Probe[T uint8 | uint16 | uint32 | uint64](t *u64Keys, vals []T, gids []uint32, i, ahead int) (int, uint64) {
	if v, ok := any(vals).([]uint64); ok && hasPrefetch && !t.probeGo {
		r, p := u64ProbeAsm(&t.slots[0], uint64(len(t.slots)-1), uint64(t.shift), unsafe.SliceData(v), unsafe.SliceData(gids), len(v), i, ahead)
		return r, p
	}
	return u64ProbeGo(t.slots, t.shift, vals, gids, i)
}

// u64ProbeGo is u64ProbeAsm in Go, without the prefetch.
func u64ProbeGo[T uint8 | uint16 | uint32 | uint64](slots []u64Slot, shift uint, vals []T, gids []uint32, i int) (int, uint64) {
	mask := uint64(len(slots) - 1)
	gids = gids[:len(vals)]
	for ; i < len(vals); i++ {
		k := uint64(vals[i])
		p := u64Slot0(k, shift)
		for {
			s := &slots[p&mask]
			if s.gid == 0 {
				return i, p & mask
			}
			if s.key == k {
				gids[i] = s.gid - 1
				break
			}
			p++
		}
	}
	return len(vals), 0
}

// u64FindDirect is u64Find without the pipeline, for small tables.
func u64FindDirect[T uint8 | uint16 | uint32 | uint64](t *u64Keys, vals []T, bm []byte, off int, gids []uint32, seq uint32, groups []uint32) []uint32 {
	n := len(vals)
	gids = gids[:n]
	groups = slices.Grow(groups, n)
	out := groups[:cap(groups)]
	ng := len(groups)
	slots, shift := t.slots, t.shift
	mask := uint64(len(slots) - 1)
	limit := u64Limit(len(slots))
	track := seq != 0
	for i, v := range vals {
		if bm != nil && !bitutil.BitIsSet(bm, off+i) {
			g, fresh := t.nullGroup(seq)
			gids[i] = g
			out[ng] = g
			if fresh {
				ng++
			}
			continue
		}
		k := uint64(v)
		p := u64Slot0(k, shift)
		for {
			s := &slots[p]
			if s.key == k && s.gid != 0 {
				g := s.gid - 1
				gids[i] = g
				if track {
					fresh := uint64(s.seq ^ seq)
					s.seq = seq
					out[ng] = g
					ng += int((fresh | -fresh) >> 63)
				}
				break
			}
			if s.gid == 0 {
				if t.keys.len() >= limit {
					t.resize(2 * len(slots))
					slots, shift = t.slots, t.shift
					mask = uint64(len(slots) - 1)
					limit = u64Limit(len(slots))
					p = u64Slot0(k, shift)
					continue
				}
				g := uint32(t.keys.len())
				t.keys.push(k)
				s.key, s.gid, s.seq = k, g+1, seq
				gids[i] = g
				if track {
					out[ng] = g
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
func (t *u64Keys) resize(n int) {
	old := t.slots
	t.slots = make([]u64Slot, n)
	t.shift = tableShift(n)
	mask := uint64(n - 1)
	for _, s := range old {
		if s.gid == 0 {
			continue
		}
		p := u64Slot0(s.key, t.shift)
		for t.slots[p].gid != 0 {
			p = (p + 1) & mask
		}
		t.slots[p] = s
	}
}

// rebuild makes the slots anew from the keys, at the given size.
func (t *u64Keys) rebuild(n int) {
	t.slots = make([]u64Slot, n)
	t.shift = tableShift(n)
	mask := uint64(n - 1)
	for g := range t.keys.len() {
		if g == t.nullGid {
			continue
		}
		k := *t.keys.at(uint32(g))
		p := u64Slot0(k, t.shift)
		for t.slots[p].gid != 0 {
			p = (p + 1) & mask
		}
		t.slots[p] = u64Slot{key: k, gid: uint32(g) + 1}
	}
}

func (t *u64Keys) compact(keep []bool) {
	if t.nullGid >= 0 {
		if !keep[t.nullGid] {
			t.nullGid = -1
		} else {
			nn := 0
			for g := range t.nullGid {
				if keep[g] {
					nn++
				}
			}
			t.nullGid = nn
		}
	}
	t.keys.compact(keep)
	n := minTableSlots
	for t.keys.len() >= u64Limit(n) {
		n *= 2
	}
	t.rebuild(n)
}

func (t *u64Keys) reset() {
	clear(t.slots)
	t.keys.reset()
	t.nullGid, t.nullSeq = -1, 0
}

func (t *u64Keys) arrays(mem memory.Allocator, idx []uint32) []arrow.Array {
	n := aggRows(idx, t.keys.len())
	var has []bool
	if t.nullGid >= 0 {
		has = make([]bool, t.keys.len())
		for g := range has {
			has[g] = g != t.nullGid
		}
	}
	var arr arrow.Array
	switch {
	case t.dt.ID() == arrow.BOOL:
		v := make([]uint8, n)
		for j := range n {
			v[j] = uint8(*t.keys.at(uint32(aggRow(idx, j))))
		}
		arr = aggBoolArray(mem, v, aggGatherBool(has, idx), nil)
	case t.width == 1:
		arr = aggFixedArray(mem, t.dt, u64Narrow[uint8](&t.keys, idx, n), aggGatherBool(has, idx), nil)
	case t.width == 2:
		arr = aggFixedArray(mem, t.dt, u64Narrow[uint16](&t.keys, idx, n), aggGatherBool(has, idx), nil)
	case t.width == 4:
		arr = aggFixedArray(mem, t.dt, u64Narrow[uint32](&t.keys, idx, n), aggGatherBool(has, idx), nil)
	case has == nil:
		arr = vecFixedArray(mem, t.dt, &t.keys, idx)
	default:
		arr = aggFixedArray(mem, t.dt, t.keys.gather(idx), aggGatherBool(has, idx), nil)
	}
	return []arrow.Array{arr}
}

func u64Narrow[T uint8 | uint16 | uint32](keys *vec[uint64], idx []uint32, n int) []T {
	out := make([]T, n)
	for j := range n {
		out[j] = T(*keys.at(uint32(aggRow(idx, j))))
	}
	return out
}

func aggGatherBool(has []bool, idx []uint32) []bool {
	if has == nil || idx == nil {
		return has
	}
	out := make([]bool, len(idx))
	for j, g := range idx {
		out[j] = has[g]
	}
	return out
}
