package engine

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestJoinKeyEncodingMatchesValues pins the join's key encoding, computed
// once per row when it enters the buffer (encodeRows): two rows of
// (int64, string) key columns encode alike exactly when their values are
// equal, including int64 values whose bytes look like a string's encoding
// and strings that hold the int64 tag byte.
func TestJoinKeyEncodingMatchesValues(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ints := []int64{0, 1, 2, 256, -1, 1 << 40, 0x0102}
	strs := []string{"", "a", "\x02", "\x01\x01a", "\x02\x00\x00\x00\x00\x00\x00\x00\x00", "ab"}
	ib, sb := array.NewInt64Builder(mem), array.NewStringBuilder(mem)
	defer ib.Release()
	defer sb.Release()
	type row struct {
		i int64
		s string
	}
	var rows []row
	for _, i := range ints {
		for _, s := range strs {
			rows = append(rows, row{i, s}, row{i, s}) // each twice: equal rows
			ib.Append(i)
			ib.Append(i)
			sb.Append(s)
			sb.Append(s)
		}
	}
	ia, sa := ib.NewArray(), sb.NewArray()
	defer ia.Release()
	defer sa.Release()
	for _, order := range [][]arrow.Array{{ia, sa}, {sa, ia}} {
		enc := make([]string, len(rows))
		for r := range rows {
			enc[r] = string(appendJoinKey(nil, order, r))
		}
		for a := range rows {
			for b := range rows {
				if (enc[a] == enc[b]) != (rows[a] == rows[b]) {
					t.Fatalf("rows %v and %v: encodings equal %t (%q, %q)", rows[a], rows[b], enc[a] == enc[b], enc[a], enc[b])
				}
			}
		}
	}
}
