package statestore

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestFullDeltaIsABase pins CommitFull: a full delta is where loads of its
// version and later ones start (the files before it may be gone), Maintain
// writes no snapshot while the newest full delta is recent, Purge drops
// what comes before the full delta at or before the oldest retained
// version (and keeps that delta), and a reopened store finds full deltas
// by reading them.
func TestFullDeltaIsABase(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	dir := t.TempDir()
	s := openTest(t, newLocal(t, dir), mem, 2, 2)
	commitRows(t, s, mem, 0, []row{{user: "a", count: 1}, {user: "b", count: 1}}, nil)
	commitRows(t, s, mem, 1, []row{{user: "c", count: 1}}, []row{{user: "b"}})
	all := []row{{user: "a", count: 2}, {user: "c", count: 2}, {user: "d", count: 1}}
	full := buildUpserts(mem, all)
	if err := s.CommitFull(ctx, 2, full); err != nil {
		t.Fatal(err)
	}
	full.Release()
	commitRows(t, s, mem, 3, []row{{user: "a", count: 3}}, []row{{user: "d"}})
	want3 := []row{{user: "a", count: 3}, {user: "c", count: 2}}
	if got := loadRows(t, s, 3); !rowsEqual(got, want3) {
		t.Fatalf("load 3: %s", diff(got, want3))
	}
	// Maintain(3): the base is delta 2, one version behind: nothing due
	// with K=2 (it would be due from the empty state).
	if err := s.Maintain(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if _, snaps, _ := s.Versions(ctx); len(snaps) != 0 {
		t.Fatalf("Maintain(3) wrote snapshots %v; delta 2 is full", snaps)
	}
	// Purge(3) keeps versions 2 and 3: delta 2 is their base, 0 and 1 go.
	if err := s.Purge(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if deltas, _, _ := s.Versions(ctx); len(deltas) != 2 || deltas[0] != 2 {
		t.Fatalf("after Purge(3) the deltas are %v, want [2 3]", deltas)
	}
	// A fresh store (no cache) loads from the full delta and purges by it.
	s2 := openTest(t, newLocal(t, dir), mem, 2, 1)
	if got := loadRows(t, s2, 2); !rowsEqual(got, sortedRows(all)) {
		t.Fatalf("load 2 from the full delta: %s", diff(got, sortedRows(all)))
	}
	if got := loadRows(t, s2, 3); !rowsEqual(got, want3) {
		t.Fatalf("reopened, load 3: %s", diff(got, want3))
	}
	commitRows(t, s2, mem, 4, []row{{user: "e", count: 1}}, nil)
	if err := s2.Maintain(ctx, 4); err != nil { // two behind delta 2: due
		t.Fatal(err)
	}
	if _, snaps, _ := s2.Versions(ctx); len(snaps) != 1 || snaps[0] != 4 {
		t.Fatalf("Maintain(4) wrote snapshots %v, want [4]", snaps)
	}
	want4 := append(want3[:1:1], row{user: "c", count: 2}, row{user: "e", count: 1})
	if got := loadRows(t, s2, 4); !rowsEqual(got, want4) {
		t.Fatalf("load 4 from its snapshot: %s", diff(got, want4))
	}
	// A re-commit of a version as an ordinary delta replaces the full
	// one: loads go back past it.
	commitRows(t, s2, mem, 5, []row{{user: "f", count: 1}}, nil)
	rows := buildUpserts(mem, []row{{user: "f", count: 9}})
	if err := s2.CommitFull(ctx, 6, rows); err != nil {
		t.Fatal(err)
	}
	rows.Release()
	if got := loadRows(t, s2, 6); len(got) != 1 {
		t.Fatalf("load 6 from its full delta: %v", got)
	}
	commitRows(t, s2, mem, 6, []row{{user: "f", count: 9}}, nil)
	if got := loadRows(t, s2, 6); len(got) != 4 {
		t.Fatalf("load 6 after its re-commit as an ordinary delta: %v", got)
	}
}

// TestFullFlagCorruption covers the flags byte of format version 2: unknown
// bits, a full snapshot, a full delta that deletes, and a version 1 file
// (no flags) whose reserved byte is ignored.
func TestFullFlagCorruption(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	dir := t.TempDir()
	s := openTest(t, newLocal(t, dir), mem, 10, 100)
	ups := buildUpserts(mem, []row{{user: "a", count: 1}})
	dels := buildDeletes(mem, []row{{user: "b"}})
	defer ups.Release()
	defer dels.Release()
	write := func(v int64, flags byte, sections []section, k kind, fv uint16) {
		t.Helper()
		data, err := encodeFileTo(nil, k, v, flags, sections, mem)
		if err != nil {
			t.Fatal(err)
		}
		if fv != formatVersion { // rewrite the version and the checksum
			data[4] = byte(fv)
			data = data[:len(data)-trailerSize]
			data, err = withTrailer(data)
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fileName(v, k)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	delta := func(withDeletes bool) []section {
		sec := []section{{schema: s.rowSchema, recs: []arrow.RecordBatch{ups}}, {schema: s.keySchema}}
		if withDeletes {
			sec[1].recs = []arrow.RecordBatch{dels}
		}
		return sec
	}
	for _, tc := range []struct {
		name   string
		flags  byte
		k      kind
		fv     uint16
		dels   bool
		reason string
	}{
		{"unknown flag", 0x02, kindDelta, formatVersion, false, "unknown flags"},
		{"full deletes", flagFull, kindDelta, formatVersion, true, "marked full deletes keys"},
		{"full snapshot", flagFull, kindSnapshot, formatVersion, false, "only a delta can be"},
		{"version 1 ignores byte 7", 0xff, kindDelta, 1, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sec := delta(tc.dels)
			if tc.k == kindSnapshot {
				sec = sec[:1]
			}
			write(0, tc.flags, sec, tc.k, tc.fv)
			defer os.Remove(filepath.Join(dir, fileName(0, tc.k)))
			_, err := s.Load(ctx, 0)
			if tc.reason == "" {
				if err != nil {
					t.Fatalf("load of a version 1 delta: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("got %v, want a corruption naming %q", err, tc.reason)
			}
		})
	}
}

// withTrailer appends the checksum and magic to a file's content.
func withTrailer(content []byte) ([]byte, error) {
	var tr [trailerSize]byte
	binary.LittleEndian.PutUint32(tr[:], crc32.Checksum(content, castagnoli))
	copy(tr[4:], fileMagic)
	return append(content, tr[:]...), nil
}
