package statestore

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestReadsFilesOfEarlierBuilds loads a state folder written by an earlier
// build (testdata/format-v1: format version 1, schema, deltas with deletes,
// null and empty lists, snapshots of 5-row records, written before
// sections were decoded in place) and checks every version against the
// rows that build loaded, then snapshots on top of those files.
func TestReadsFilesOfEarlierBuilds(t *testing.T) {
	src := filepath.Join("testdata", "format-v1")
	want, err := os.ReadFile(filepath.Join(src, "rows.txt"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() // Maintain writes: work on a copy
	entries, err := os.ReadDir(filepath.Join(src, "state"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, "state", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mem := newMem(t)
	s := openTest(t, newLocal(t, dir), mem, 1, 100)
	render := func() string {
		var b strings.Builder
		for v := int64(0); v < 8; v++ {
			fmt.Fprintf(&b, "version %d\n", v)
			for _, r := range loadRows(t, s, v) {
				fmt.Fprintf(&b, "%s\n", r)
			}
		}
		return b.String()
	}
	if got := render(); got != string(want) {
		t.Fatalf("loads of the earlier build's files differ from what it loaded:\n%s", lineDiff(got, string(want)))
	}
	// This build's snapshot of version 7, over the earlier files.
	s.opts.SnapshotDeltaRatio = 1e-9
	if err := s.Maintain(context.Background(), 7); err != nil {
		t.Fatal(err)
	}
	if _, snaps, err := s.Versions(context.Background()); err != nil || fmt.Sprint(snaps) != "[2 5 7]" {
		t.Fatalf("snapshots %v, %v; want [2 5 7]", snaps, err)
	}
	if got := render(); got != string(want) {
		t.Fatalf("loads after a new snapshot differ:\n%s", lineDiff(got, string(want)))
	}
}

// lineDiff names the first line where got and want differ.
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, a, b)
		}
	}
	return "equal"
}

// TestReadSectionDamaged feeds readSection every prefix of a valid
// section, and copies whose message framing (continuation and length
// words) has one byte altered: it must fail or decode, never panic, and
// release what it allocated. (The checksum stops such bytes first; bytes
// altered inside Arrow's own metadata are Arrow's to parse, and can make it
// allocate without bound, so they are not tried here.)
func TestReadSectionDamaged(t *testing.T) {
	mem := newMem(t)
	ups := buildUpserts(mem, []row{{user: "a", count: 1, seen: []string{"x"}}, {user: "b", shard: 2}, {user: "c", seen: []string{}}})
	defer ups.Release()
	data, err := encodeFile(kindDelta, 0, []section{{schema: Join(testKey, testValue), recs: []arrow.RecordBatch{ups}}, {schema: testKey}}, mem)
	if err != nil {
		t.Fatal(err)
	}
	body := data[headerSize+sectionHeaderSize : headerSize+sectionHeaderSize+int(binary.LittleEndian.Uint64(data[headerSize:]))]
	try := func(b []byte) {
		s, err := readSection(b, mem)
		if err == nil {
			for _, r := range s.recs {
				r.Release()
			}
		}
	}
	for n := 0; n < len(body); n++ {
		try(body[:n])
	}
	var framing []int // offsets of the framing bytes of each message
	for off := 0; off+8 <= len(body); {
		for i := off; i < off+8; i++ {
			framing = append(framing, i)
		}
		n := int(binary.LittleEndian.Uint32(body[off+4:]))
		if n == 0 {
			break
		}
		m := &sliceMessages{data: body[off:]}
		msg, err := m.Message()
		if err != nil {
			t.Fatal(err)
		}
		off += 8 + n + int(msg.BodyLen())
		m.Release()
	}
	if len(framing) < 3*8 { // schema, record batch, end of stream
		t.Fatalf("found %d framing bytes", len(framing))
	}
	for _, i := range framing {
		for _, x := range []byte{0x01, 0x80, 0xFF} {
			b := slices.Clone(body)
			b[i] ^= x
			try(b)
		}
	}
	s, err := readSection(body, mem)
	if err != nil || len(s.recs) != 1 || s.recs[0].NumRows() != 3 {
		t.Fatalf("intact section: %v", err)
	}
	s.recs[0].Release()
}
