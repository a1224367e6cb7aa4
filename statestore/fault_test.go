package statestore

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/storage"
)

var errInjected = errors.New("injected fault")

// faultFS fails the failAt-th call (1-based) and passes every other call
// to the operating system.
type faultFS struct {
	storage.OSFS
	calls  atomic.Int64
	failAt int64
	reads  atomic.Int64 // ReadFile and WalkDir calls
}

func (f *faultFS) hit() error {
	if f.calls.Add(1) == f.failAt {
		return errInjected
	}
	return nil
}

func (f *faultFS) Create(name string) (storage.File, error) {
	if err := f.hit(); err != nil {
		return nil, err
	}
	return f.OSFS.Create(name)
}

func (f *faultFS) ReadFile(name string) ([]byte, error) {
	f.reads.Add(1)
	if err := f.hit(); err != nil {
		return nil, err
	}
	return f.OSFS.ReadFile(name)
}

func (f *faultFS) Link(o, n string) error {
	if err := f.hit(); err != nil {
		return err
	}
	return f.OSFS.Link(o, n)
}

func (f *faultFS) Rename(o, n string) error {
	if err := f.hit(); err != nil {
		return err
	}
	return f.OSFS.Rename(o, n)
}

func (f *faultFS) Remove(name string) error {
	if err := f.hit(); err != nil {
		return err
	}
	return f.OSFS.Remove(name)
}

func (f *faultFS) SyncDir(dir string) error {
	if err := f.hit(); err != nil {
		return err
	}
	return f.OSFS.SyncDir(dir)
}

func (f *faultFS) WalkDir(root string, fn fs.WalkDirFunc) error {
	f.reads.Add(1)
	if err := f.hit(); err != nil {
		return err
	}
	return f.OSFS.WalkDir(root, fn)
}

// TestFaultTolerance runs commits, maintenance and purges with the n-th
// file-system call failing, for n = 1, 2, … until nothing fails. The run
// stops at the first error, as a crashed query would; then a clean reopen
// must load every retained version exactly, and re-running from there must
// reach the right final state.
func TestFaultTolerance(t *testing.T) {
	const versions, k, retain = 8, 3, 4
	// The changes of each batch, fixed, and the state after each.
	rng := rand.New(rand.NewPCG(5, 5))
	model := map[string]row{}
	var ups, dels [][]row
	var states []map[string]row
	for v := int64(0); v < versions; v++ {
		u, d := randomChanges(rng, model, 8, v)
		ups, dels = append(ups, u), append(dels, d)
		states = append(states, maps.Clone(model))
	}
	// run does batches from..versions-1, committing then maintaining and
	// purging, and returns the last version whose Commit succeeded.
	run := func(s *Store, from int64) (int64, error) {
		ctx := context.Background()
		mem := s.mem
		last := from - 1
		for v := from; v < versions; v++ {
			u, d := buildUpserts(mem, ups[v]), buildDeletes(mem, dels[v])
			err := s.Commit(ctx, v, u, d)
			u.Release()
			d.Release()
			if err != nil {
				return last, err
			}
			last = v
			if err := s.Maintain(ctx, v); err != nil {
				return last, err
			}
			if err := s.Purge(ctx, v); err != nil {
				return last, err
			}
		}
		return last, nil
	}
	for failAt := int64(1); ; failAt++ {
		dir := t.TempDir()
		ffs := &faultFS{failAt: failAt}
		mem := newMem(t)
		st, err := storage.OpenLocal(dir, storage.LocalOptions{FS: ffs})
		if err != nil {
			if errors.Is(err, errInjected) {
				continue
			}
			t.Fatal(err)
		}
		last, runErr := int64(-1), error(nil)
		s, err := Open(context.Background(), st, Options{KeySchema: testKey, ValueSchema: testValue, SnapshotEvery: k, MinVersionsToRetain: retain, Allocator: mem})
		if err == nil {
			last, runErr = run(s, 0)
		} else {
			runErr = err
		}
		if runErr != nil && !errors.Is(runErr, errInjected) {
			t.Fatalf("failAt %d: unexpected error %v", failAt, runErr)
		}
		// Reopen on the real file system ("restart").
		s2 := openTest(t, newLocal(t, dir), mem, k, retain)
		for v := max(0, last-retain+1); v <= last; v++ {
			got := loadRows(t, s2, v)
			if m := modelRows(states[v]); !rowsEqual(sortedRows(got), m) {
				t.Fatalf("failAt %d: after restart version %d differs from model\n%s", failAt, v, diff(sortedRows(got), m))
			}
		}
		// The engine re-runs the batch after the last committed one.
		if _, err := run(s2, last+1); err != nil {
			t.Fatalf("failAt %d: recovery run: %v", failAt, err)
		}
		got := loadRows(t, s2, versions-1)
		if m := modelRows(states[versions-1]); !rowsEqual(sortedRows(got), m) {
			t.Fatalf("failAt %d: final state differs from model\n%s", failAt, diff(sortedRows(got), m))
		}
		if runErr == nil {
			if failAt < 20 {
				t.Fatalf("no fault injected at %d: the test does not reach the file system", failAt)
			}
			t.Logf("%d fault points exercised", failAt-1)
			return
		}
		_ = os.RemoveAll(dir)
	}
}

// TestCommitReadsNothing checks that Commit neither reads nor lists: its
// cost cannot depend on the state already stored.
func TestCommitReadsNothing(t *testing.T) {
	mem := newMem(t)
	s, ffs := openCounted(t, mem)
	for v := int64(0); v < 3; v++ {
		commitRows(t, s, mem, v, []row{{user: "a", shard: v}}, nil)
		if err := s.Maintain(context.Background(), v); err != nil {
			t.Fatal(err)
		}
	}
	before, calls := ffs.reads.Load(), ffs.calls.Load()
	commitRows(t, s, mem, 3, []row{{user: "b", shard: 1}}, []row{{user: "a", shard: 0}})
	if r := ffs.reads.Load() - before; r != 0 {
		t.Fatalf("Commit made %d read or list calls", r)
	}
	if c := ffs.calls.Load() - calls; c > 4 { // create, rename, sync dir (+ mkdir is not counted)
		t.Fatalf("Commit made %d file-system calls", c)
	}
}

// TestMaintainAfterAFullDeltaReadsNothing: a version committed full is its
// own base, so Maintain of it has nothing to do and must not list the
// folder (it runs after every batch); after an ordinary delta it lists.
func TestMaintainAfterAFullDeltaReadsNothing(t *testing.T) {
	mem := newMem(t)
	s, ffs := openCounted(t, mem)
	ctx := context.Background()
	rows := buildUpserts(mem, []row{{user: "a", count: 1}, {user: "b", count: 2}})
	defer rows.Release()
	if err := s.CommitFull(ctx, 0, rows); err != nil {
		t.Fatal(err)
	}
	before := ffs.reads.Load()
	if err := s.Maintain(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if r := ffs.reads.Load() - before; r != 0 {
		t.Fatalf("Maintain of a full version made %d read or list calls", r)
	}
	commitRows(t, s, mem, 1, []row{{user: "c", count: 3}}, nil)
	before = ffs.reads.Load()
	if err := s.Maintain(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if ffs.reads.Load() == before {
		t.Fatal("Maintain of an ordinary delta listed nothing: the test does not see listings")
	}
}

// openCounted opens a store (SnapshotEvery 1, retention 100) on a local
// folder whose file-system calls the returned faultFS counts.
func openCounted(t *testing.T, mem memory.Allocator) (*Store, *faultFS) {
	t.Helper()
	ffs := &faultFS{}
	st, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{FS: ffs})
	if err != nil {
		t.Fatal(err)
	}
	return openTest(t, st, mem, 1, 100), ffs
}
