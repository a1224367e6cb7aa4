package files

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// countingStore counts the objects read from a real store.
type countingStore struct {
	storage.Store
	gets atomic.Int64
}

func (c *countingStore) Get(ctx context.Context, name string) ([]byte, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, name)
}

func payment(id int) string {
	return fmt.Sprintf(`{"id":%d,"amount_cents":%d,"ts":"2026-11-30T10:00:00Z"}`+"\n", id, id)
}

// logObjects counts the plain and compact entries in store.
func logObjects(t *testing.T, store storage.Store) (plain, compact int) {
	t.Helper()
	infos, err := store.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		switch {
		case strings.HasPrefix(in.Name, logDir+"/"):
			plain++
		case strings.HasPrefix(in.Name, compactDir+"/"):
			compact++
		}
	}
	return plain, compact
}

// firstColumn reads [start, end) and returns the id column.
func firstColumn(t *testing.T, s *Source, start, end int64) ([]int, error) {
	t.Helper()
	rs, err := rows(t, s, start, end)
	var ids []int
	for _, r := range rs {
		id, cerr := strconv.Atoi(strings.SplitN(r, "|", 2)[0])
		if cerr != nil {
			t.Fatal(cerr)
		}
		ids = append(ids, id)
	}
	return ids, err
}

// TestCompactionManyBatches plays the engine over hundreds of batches with
// restarts (some between planning and commit, as after a crash) and checks
// after every commit that the checkpoint folder holds O(interval) objects,
// that no name is taken twice and every file is read once, that a restart
// reads only the newest compact entry and the entries after it, and that
// the whole history can still be read.
func TestCompactionManyBatches(t *testing.T) {
	const (
		batches  = 320
		interval = 10
	)
	ctx := context.Background()
	dir := t.TempDir()
	store := &countingStore{Store: checkpoint(t)}
	opts := []Option{WithMaxFilesPerTrigger(2), WithLogCompactInterval(interval)}
	s := open(t, store, dir, JSON, payments(), opts...)
	takenBy := map[string]int64{}
	readCount := map[int]int{}
	nextFile, k := 0, int64(-1)
	for b := range batches {
		for range 1 + b%3 { // 1 to 3 files land; at most 2 are taken
			landing(t, dir, fmt.Sprintf("p-%05d.json", nextFile), payment(nextFile), time.Duration(nextFile)*time.Millisecond)
			nextFile++
		}
		next := latest(t, s, k)
		if next != k+1 {
			t.Fatalf("batch %d: latest %d after %d", b, next, k)
		}
		for _, f := range s.mu.entries[next].Files {
			if prev, ok := takenBy[f.Name]; ok {
				t.Fatalf("%s taken by entries %d and %d", f.Name, prev, next)
			}
			takenBy[f.Name] = next
		}
		if b%41 == 7 { // a crash after planning: restart, plan again, same entry
			s = open(t, store, dir, JSON, payments(), opts...)
			if again := latest(t, s, k); again != next {
				t.Fatalf("batch %d: after restart latest %d, want %d", b, again, next)
			}
		}
		ids, err := firstColumn(t, s, k, next)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			readCount[id]++
		}
		if err := s.Commit(ctx, EncodeOffset(next)); err != nil {
			t.Fatal(err)
		}
		k = next
		plain, compact := logObjects(t, store)
		if wantPlain := int(k - s.mu.compacted); plain != wantPlain || compact != min(1, int(s.mu.compacted+1)) {
			t.Fatalf("after entry %d: %d plain and %d compact entries, want %d and at most 1", k, plain, compact, wantPlain)
		}
		if plain >= interval {
			t.Fatalf("after entry %d: %d plain entries, want fewer than %d", k, plain, interval)
		}
		if b%37 == 36 {
			store.gets.Store(0)
			s = open(t, store, dir, JSON, payments(), opts...)
			if n := store.gets.Load(); n > interval+1 { // a compact entry, the plain ones after it, cleanup
				t.Fatalf("restart at entry %d read %d objects, want at most %d", k, n, interval+1)
			}
		}
	}
	// Drain the backlog.
	for next := latest(t, s, k); next != k; next = latest(t, s, k) {
		ids, err := firstColumn(t, s, k, next)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			readCount[id]++
		}
		if err := s.Commit(ctx, EncodeOffset(next)); err != nil {
			t.Fatal(err)
		}
		k = next
	}
	if len(readCount) != nextFile {
		t.Fatalf("read %d distinct files of %d", len(readCount), nextFile)
	}
	for id, n := range readCount {
		if n != 1 {
			t.Fatalf("file %d read %d times", id, n)
		}
	}
	// The compact entry keeps each entry's files: the whole history reads
	// again (a fork, an audit), in the order it was first read.
	s = open(t, store, dir, JSON, payments(), opts...)
	all, err := firstColumn(t, s, -1, k)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != nextFile {
		t.Fatalf("history read %d rows, want %d", len(all), nextFile)
	}
	for i, id := range all {
		if id != i {
			t.Fatalf("history row %d is file %d", i, id)
		}
	}
}

// TestOldCheckpoint opens a checkpoint written before compaction existed
// (plain entries only, byte for byte as the old code wrote them), keeps
// its taken names, compacts it at the next commit, and still reads it.
func TestOldCheckpoint(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := &countingStore{Store: checkpoint(t)}
	const old = 25
	for i := range old {
		name := fmt.Sprintf("o-%02d.json", i)
		landing(t, dir, name, payment(i), time.Duration(i)*time.Second)
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		entry := fmt.Sprintf("v1\n{\"files\":[{\"name\":%q,\"size\":%d,\"modTime\":%d}]}\n", name, st.Size(), st.ModTime().UnixNano())
		if err := store.PutIfAbsent(ctx, offsetlog.FileName(logDir, int64(i)), []byte(entry)); err != nil {
			t.Fatal(err)
		}
	}
	landing(t, dir, "new.json", payment(old), time.Hour)
	s := open(t, store, dir, JSON, payments(), WithLogCompactInterval(10))
	if next := latest(t, s, old-1); next != old || loggedNames(s, old) != "[new.json]" {
		t.Fatalf("took entry %d %s, want 25 [new.json]", next, loggedNames(s, old))
	}
	if _, err := store.Get(ctx, cleanupName); !storage.IsNotExist(err) {
		t.Fatalf("cleanup object before the compaction: %v", err)
	}
	if err := s.Commit(ctx, EncodeOffset(old)); err != nil {
		t.Fatal(err)
	}
	// A build that predates compaction reads only a version 1 cleanup
	// object: this one makes it refuse the compacted checkpoint.
	if mark, err := store.Get(ctx, cleanupName); err != nil || string(mark) != `{"version":2,"through":-1}` {
		t.Fatalf("cleanup object %s, %v", mark, err)
	}
	// Compacted through 19 (the boundary at or before 25): entries 20…25
	// stay plain.
	if plain, compact := logObjects(t, store); plain != 6 || compact != 1 {
		t.Fatalf("%d plain and %d compact entries, want 6 and 1", plain, compact)
	}
	data, err := store.Get(ctx, offsetlog.FileName(compactDir, 19))
	if err != nil {
		t.Fatal(err)
	}
	wantHead := `v1` + "\n" + `{"version":2,"through":19,"newestModTime":` + strconv.FormatInt(t0.Add(19*time.Second).UnixNano(), 10) + `,"entries":[{"k":0,"files":[{"name":"o-00.json","size":`
	if !strings.HasPrefix(string(data), wantHead) || strings.Count(string(data), `"k":`) != 20 {
		t.Fatalf("compact entry:\n%s\nwant it to begin\n%s", data, wantHead)
	}
	store.gets.Store(0)
	s = open(t, store, dir, JSON, payments())
	if n := store.gets.Load(); n != 1+6+1 { // compact/19, files/20…25, cleanup
		t.Fatalf("restart read %d objects, want 8", n)
	}
	ids, err := firstColumn(t, s, -1, old)
	if err != nil || len(ids) != old+1 || ids[3] != 3 || ids[old] != old {
		t.Fatalf("history %v, %v", ids, err)
	}
	landing(t, dir, "o-03.json", payment(99), 2*time.Hour) // a taken name reappears
	if off, err := s.LatestOffset(ctx, EncodeOffset(old)); !errors.Is(err, ErrFileChanged) {
		t.Fatalf("a taken name reappeared: LatestOffset %s, %v; want ErrFileChanged", off, err)
	}
}

// TestMaxFileAge checks Spark's maxFileAge semantics: names older than the
// newest taken file minus the age are forgotten at compaction, so the
// remembered set stays bounded, and files that old are never taken; by
// default every name is remembered and an old file is still taken.
func TestMaxFileAge(t *testing.T) {
	const step = 5 * time.Second
	tests := []struct {
		name      string
		opts      []Option
		maxTaken  int  // most names remembered at any point
		lateTaken bool // an old file landing late is taken
	}{
		{"default keeps every name", nil, 1000, true},
		{"age 10s", []Option{WithMaxFileAge(2 * step)}, 6, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			store := checkpoint(t)
			opts := append([]Option{WithMaxFilesPerTrigger(1), WithLogCompactInterval(2)}, tc.opts...)
			s := open(t, store, dir, JSON, payments(), opts...)
			k := int64(-1)
			step1 := func() bool {
				t.Helper()
				next := latest(t, s, k)
				if next == k {
					return false
				}
				if _, err := firstColumn(t, s, k, next); err != nil {
					t.Fatal(err)
				}
				if err := s.Commit(ctx, EncodeOffset(next)); err != nil {
					t.Fatal(err)
				}
				k = next
				if n := len(s.mu.taken); n > tc.maxTaken {
					t.Fatalf("after entry %d: %d names remembered, want at most %d", k, n, tc.maxTaken)
				}
				return true
			}
			const files = 40
			for i := range files {
				landing(t, dir, fmt.Sprintf("f%02d.json", i), payment(i), time.Duration(i)*step)
				if !step1() {
					t.Fatalf("file %d not taken", i)
				}
				if i == 20 {
					s = open(t, store, dir, JSON, payments(), opts...) // restart
				}
			}
			// An old file lands late; a forgotten name reappears with its
			// old time (a remembered one would be a changed file).
			landing(t, dir, "late.json", payment(100), 3*step)
			if !tc.lateTaken {
				landing(t, dir, "f01.json", payment(101), step)
			}
			s = open(t, store, dir, JSON, payments(), opts...)
			took := step1()
			if took != tc.lateTaken {
				t.Fatalf("late old file taken: %v, want %v (entry %d: %s)", took, tc.lateTaken, k, loggedNames(s, k))
			}
			if took && loggedNames(s, k) != "[late.json]" {
				t.Fatalf("entry %d took %s, want [late.json]", k, loggedNames(s, k))
			}
			_, err := firstColumn(t, s, -1, 0)
			if tc.lateTaken {
				if err != nil {
					t.Fatalf("read entry 0: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrBadOffset) || !strings.Contains(err.Error(), "forgotten") {
				t.Fatalf("read of a forgotten entry: %v, want ErrBadOffset naming it forgotten", err)
			}
			if plain, compact := logObjects(t, store); plain > 2 || compact != 1 {
				t.Fatalf("%d plain and %d compact entries", plain, compact)
			}
			// A forgotten name with a recent time is a new file.
			landing(t, dir, "f01.json", payment(102), files*step)
			if !step1() || loggedNames(s, k) != "[f01.json]" {
				t.Fatalf("a recent file under a forgotten name was not taken (entry %d %s)", k, loggedNames(s, k))
			}
		})
	}
}

// TestCompactCorruption checks that a damaged compacted log fails
// OpenCheckpoint with a corruption error naming the object.
func TestCompactCorruption(t *testing.T) {
	tests := []struct {
		name   string
		damage func(ctx context.Context, st storage.Store) error
		want   string
	}{
		{"torn compact entry", func(ctx context.Context, st storage.Store) error {
			return st.Put(ctx, offsetlog.FileName(compactDir, 3), []byte("v1\n{\"through\":3,"))
		}, "compact/00000000000000000003"},
		{"compact entry under another id", func(ctx context.Context, st storage.Store) error {
			b, err := st.Get(ctx, offsetlog.FileName(compactDir, 3))
			if err != nil {
				return err
			}
			return st.Put(ctx, offsetlog.FileName(compactDir, 5), b)
		}, "through 3 does not match"},
		{"missing plain entry", func(ctx context.Context, st storage.Store) error {
			return st.Delete(ctx, offsetlog.FileName(logDir, 4))
		}, "files/00000000000000000004 is missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			store := checkpoint(t)
			opts := []Option{WithMaxFilesPerTrigger(1), WithLogCompactInterval(4)}
			s := open(t, store, dir, JSON, payments(), opts...)
			k := int64(-1)
			for i := range 6 {
				landing(t, dir, fmt.Sprintf("f%d.json", i), payment(i), time.Duration(i)*time.Second)
				k = latest(t, s, k)
				if err := s.Commit(ctx, EncodeOffset(k)); err != nil {
					t.Fatal(err)
				}
			}
			if err := tc.damage(ctx, store); err != nil {
				t.Fatal(err)
			}
			s2, _ := New(dir, JSON, payments(), opts...)
			err := s2.OpenCheckpoint(ctx, store)
			if !errors.Is(err, offsetlog.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("open: %v, want a corruption error naming %q", err, tc.want)
			}
		})
	}
}

// BenchmarkCompactedLog measures, for a history of n entries of one file
// each, one compaction (its cost grows with the remembered entries) and
// one OpenCheckpoint of the compacted log, on a local store that fsyncs,
// and one OpenCheckpoint of the same history as plain entries.
func BenchmarkCompactedLog(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			ctx := context.Background()
			st, err := storage.OpenLocal(b.TempDir(), storage.LocalOptions{})
			if err != nil {
				b.Fatal(err)
			}
			store := storage.Sub(st, "sources/0")
			s, err := New(b.TempDir(), JSON, payments(), WithLogCompactInterval(1))
			if err != nil {
				b.Fatal(err)
			}
			if err := s.OpenCheckpoint(ctx, store); err != nil {
				b.Fatal(err)
			}
			add := func(k int64) {
				s.mu.entries[k] = LogEntry{Files: []FileRecord{{Name: fmt.Sprintf("p-%09d.json", k), Size: 4096, ModTime: t0.Add(time.Duration(k) * time.Second).UnixNano()}}}
				s.mu.latest = k
			}
			for k := range int64(n) {
				add(k)
			}
			b.Run("compact", func(b *testing.B) {
				for b.Loop() {
					s.mu.Lock()
					add(s.mu.latest + 1)
					err := s.compactThrough(ctx, s.mu.latest)
					s.mu.Unlock()
					if err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("open", func(b *testing.B) {
				for b.Loop() {
					if err := s.OpenCheckpoint(ctx, store); err != nil {
						b.Fatal(err)
					}
				}
			})
			// The same history as plain entries only, as before compaction.
			plain, err := storage.OpenLocal(b.TempDir(), storage.LocalOptions{NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			log := offsetlog.New[LogEntry](plain, logDir)
			for k := range int64(n) {
				if err := log.Add(ctx, k, s.mu.entries[k]); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("open-uncompacted", func(b *testing.B) {
				for b.Loop() {
					if err := s.OpenCheckpoint(ctx, plain); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
