package kernel

import (
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// keyTable maps the key values of rows to dense group ids 0, 1, … in order of
// first sight, and gives the key columns of groups back as Arrow arrays.
//
// Two implementations: u64Keys (keytable_u64.go) for one fixed-width key
// column of at most 8 bytes (integers, floats, bool, temporal types: the
// value's bits are the key), and bytesKeys (keytable_bytes.go) for
// everything else (one string/binary column: its bytes are the key;
// several columns: the row encoding of keycodec.go). Both are
// open-addressing tables of power-of-two size with linear probing, at most
// 7/8 full (tableLimit; tables of up to a few MiB half full: u64Limit,
// strLimit), slots
// holding the key beside the group id: u64Keys the 64-bit key, bytesKeys
// the first 15 bytes and length of a byte key (a longer key: its hash,
// length and arena offset, compared then in the arena). The key values by
// group id live in a vec (u64Keys) or an arena (bytesKeys), for output.
type keyTable interface {
	// find writes the group id of each row of cols into gids, adding the
	// unseen keys as new groups, and appends to groups the distinct groups
	// of the rows in first-seen order. seq identifies the call: a slot
	// remembers the last seq that saw it, which is what makes a group's
	// first sight in a call free to detect (no pass over a mark array).
	// seq 0 asks for the gids only: the table then leaves its slots
	// unwritten on a hit (a table that stays clean in the cache) and
	// returns groups as given (see GroupBy.track).
	find(cols []arrow.Array, gids []uint32, seq uint32, groups []uint32) []uint32
	// clearSeq forgets every seq (when the caller's counter wraps).
	clearSeq()
	len() int
	// arrays returns the key columns of the groups idx (nil: all groups).
	arrays(mem memory.Allocator, idx []uint32) []arrow.Array
	// compact drops the groups whose keep is false; the others keep their
	// order and are renumbered densely.
	compact(keep []bool)
	// reset drops every group, keeping the table's slots and arrays for
	// the groups to come.
	reset()
	memoryBytes() int64
}

// keyTypeWidth is the byte width of a fixed-width key type (bool: 1), 0 for a
// variable-width one, -1 for a type that cannot be a key.
func keyTypeWidth(dt arrow.DataType) int {
	switch dt.ID() {
	case arrow.INT8, arrow.UINT8, arrow.BOOL:
		return 1
	case arrow.INT16, arrow.UINT16:
		return 2
	case arrow.INT32, arrow.UINT32, arrow.FLOAT32, arrow.DATE32, arrow.TIME32:
		return 4
	case arrow.INT64, arrow.UINT64, arrow.FLOAT64, arrow.DATE64, arrow.TIME64, arrow.TIMESTAMP, arrow.DURATION:
		return 8
	case arrow.DECIMAL128:
		return 16
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return 0
	}
	return -1
}

func newKeyTable(fields []arrow.Field) keyTable {
	if len(fields) == 1 {
		if w := keyTypeWidth(fields[0].Type); w >= 1 && w <= 8 {
			return &u64Keys{dt: fields[0].Type, width: w, nullGid: -1}
		}
	}
	return &bytesKeys{fields: fields, single: len(fields) == 1 && keyTypeWidth(fields[0].Type) == 0, nullGid: -1}
}

const minTableSlots = 256

// tableLimit is the number of groups a table of n slots holds before it
// doubles: 7/8 of the slots. Linear probing stays short at that load (a
// found key is on average within 2-3 slots, mostly the same cache line),
// and the denser table keeps more of it in cache.
func tableLimit(n int) int { return n - n/8 }

// tableShift is 64 - log2(slots) for a table of the given power-of-two size:
// slot = (mixed hash) >> shift takes the hash's top bits.
func tableShift(slots int) uint {
	return uint(64 - bits.TrailingZeros64(uint64(slots)))
}

// probeBlock is the number of rows whose slots are loaded together before
// any of them is compared. The compare branches depend on the loaded slot
// and mispredict now and then (a collision, a group's first row in the
// batch); with the loads already issued, a mispredict no longer waits for
// a cache miss, and the misses of a block overlap.
const probeBlock = 16
