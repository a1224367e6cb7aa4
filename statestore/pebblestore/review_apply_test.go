package pebblestore

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// rvCancelStore cancels cancel right after a delta file is written while
// armed: the commit's context ends between the delta write and the end
// of the working copy's apply (a query stopped by its context, or a
// SIGTERM, during a commit).
type rvCancelStore struct {
	storage.Store
	armed  atomic.Bool
	cancel context.CancelFunc
}

func (s *rvCancelStore) hit(name string) {
	if strings.HasSuffix(name, ".delta") && s.armed.Load() {
		s.cancel()
	}
}

func (s *rvCancelStore) Put(ctx context.Context, name string, data []byte) error {
	err := s.Store.Put(ctx, name, data)
	if err == nil {
		s.hit(name)
	}
	return err
}

func (s *rvCancelStore) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	err := s.Store.PutIfAbsent(ctx, name, data)
	if err == nil {
		s.hit(name)
	}
	return err
}

// TestReviewPartialApplyIsNotCommittedState: (hidden before h/pebevict,
// whose openLocal now reuses the working copy) a version whose changes
// exceed one pebble batch (applyRows) is applied in several batches; when
// the commit stops after the first of them (its context ends once the
// delta is written), the batch is not committed, so the engine restarts
// from the version before it. That version must read as it was: the
// working copy must not keep the first applyRows rows of the uncommitted
// version (else the re-run of the batch merges its input a second time
// into them: a double count).
func TestReviewPartialApplyIsNotCommittedState(t *testing.T) {
	mem := newMem(t)
	dir, work := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &rvCancelStore{Store: local(t, dir), cancel: cancel}
	n := int64(applyRows + 1000)
	gs := make([]int64, n)
	for i := range gs {
		gs[i] = int64(i)
	}
	s := openAt(t, st, work, mem, -1, 0)
	commit(t, s, mem, 0, gs, nil) // version 0: g -> (0, 0)
	st.armed.Store(true)
	u := rows(mem, 1, gs) // version 1: g -> (g, 1)
	err := s.Commit(ctx, 1, u, nil)
	u.Release()
	if err == nil {
		t.Fatal("the commit of version 1 did not see its context end")
	}
	t.Logf("commit of version 1: %v", err)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The restart: version 1 was never committed (no commit log), so the
	// engine restores version 0 and re-runs batch 1.
	st.armed.Store(false)
	s = openAt(t, st, work, mem, 0, 0)
	defer s.Close()
	var wrong int
	var first string
	for _, r := range loadAll(t, s, 0) {
		if !strings.HasSuffix(r, ":0:0:(null)") && !strings.Contains(r, ":0:0:[") {
			if wrong == 0 {
				first = r
			}
			wrong++
		}
	}
	if wrong > 0 {
		t.Fatalf("after a restore of version 0, %d of %d rows hold version 1's values (first: %s): the working copy kept the part of the uncommitted version 1 that was applied", wrong, n, first)
	}
}

// rvCancelGet cancels cancel right after a snapshot file of the in-memory
// backend is read while armed.
type rvCancelGet struct {
	storage.Store
	armed  atomic.Bool
	cancel context.CancelFunc
}

func (s *rvCancelGet) Get(ctx context.Context, name string) ([]byte, error) {
	b, err := s.Store.Get(ctx, name)
	if err == nil && strings.HasSuffix(name, ".snapshot") && s.armed.Load() {
		s.cancel()
	}
	return b, err
}

// TestReviewInterruptedMigrationRestores: a folder of the in-memory
// backend, with the deltas before its newest snapshot purged, is continued
// on pebble; the first restore (the migration: a new working copy, then
// the snapshot's rows loaded into it) stops once the snapshot is read (its
// context ends: a stop, a kill, a failed read). The next restore must give
// the in-memory backend's state: it must not reuse the new, empty copy at
// version -1 and then ask for delta 0, which retention purged (the query
// would never start again until someone deletes the working directory).
// Before h/pebevict every restart rebuilt the copy (openLocal looked for
// CURRENT, which pebble v2 does not write), which hid this.
func TestReviewInterruptedMigrationRestores(t *testing.T) {
	mem := newMem(t)
	dir, work := t.TempDir(), t.TempDir()
	bg := context.Background()
	ms, err := statestore.Open(bg, local(t, dir), statestore.Options{KeySchema: kSchema, ValueSchema: vSchema, SnapshotEvery: 2, MinVersionsToRetain: 2, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	n := int64(applyRows + 1000)
	gs := make([]int64, n)
	for i := range gs {
		gs[i] = int64(i)
	}
	for v := int64(0); v <= 5; v++ {
		ups := gs
		if v > 0 {
			ups = []int64{v, 100 + v}
		}
		u, d := rows(mem, v+1, ups), keys(mem, nil)
		err := ms.Commit(bg, v, u, d)
		u.Release()
		d.Release()
		if err == nil {
			err = ms.Maintain(bg, v)
		}
		if err == nil {
			err = ms.Purge(bg, v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want, err := ms.Load(bg, 5)
	if err != nil {
		t.Fatal(err)
	}
	wantRows := dump(want...)
	releaseAll(want)
	deltas, snaps, err := ms.Versions(bg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("in-memory folder: deltas %v, snapshots %v", deltas, snaps)
	if len(deltas) == 0 || deltas[0] == 0 {
		t.Fatalf("delta 0 was not purged (deltas %v): the test needs a snapshot-only base", deltas)
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	st := &rvCancelGet{Store: local(t, dir), cancel: cancel}
	open := func() *Store {
		s, err := Open(bg, st, Options{
			State: statestore.Options{KeySchema: kSchema, ValueSchema: vSchema, MinVersionsToRetain: 2, Allocator: mem, Backend: BackendName},
			Dir:   work, MemTableSize: 1 << 20, TimeIndex: "",
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	st.armed.Store(true)
	err = s.Restore(ctx, 5)
	st.armed.Store(false)
	if cerr := s.Close(); cerr != nil {
		t.Fatal(cerr)
	}
	if err == nil {
		t.Skip("the first restore did not see its context end")
	}
	t.Logf("interrupted restore: %v", err)
	s = open()
	defer s.Close()
	if err := s.Restore(bg, 5); err != nil {
		t.Fatalf("the restore after an interrupted migration fails: %v", err)
	}
	got := loadAll(t, s, 5)
	if len(got) != len(wantRows) {
		t.Fatalf("after the interrupted migration pebble holds %d rows, the in-memory folder %d", len(got), len(wantRows))
	}
	for i := range got {
		if got[i] != wantRows[i] {
			t.Fatalf("row %d: pebble %s, in-memory %s", i, got[i], wantRows[i])
		}
	}
}

// TestReviewEmptyCopyOnAWorkerThatComesBack: a worker opens partition 0
// at the start (an empty working copy at version -1) and stops before any
// commit; the partition then runs elsewhere until retention purged delta
// 0 (snapshots were uploaded). When it comes back to the first worker,
// the restore must use the uploaded snapshot, not take the empty copy for
// version -1 and then ask for delta 0.
func TestReviewEmptyCopyOnAWorkerThatComesBack(t *testing.T) {
	mem := newMem(t)
	dir := t.TempDir()
	st := local(t, dir)
	workA, workB := t.TempDir(), t.TempDir()
	a := openAt(t, st, workA, mem, -1, 2) // opened, never committed
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := openAt(t, st, workB, mem, -1, 2)
	for v := int64(0); v < 10; v++ {
		commit(t, b, mem, v, []int64{v, v + 100}, nil)
		if err := b.Maintain(context.Background(), v); err != nil {
			t.Fatal(err)
		}
		if err := b.Purge(context.Background(), v); err != nil {
			t.Fatal(err)
		}
	}
	want := loadAll(t, b, 9)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), st, Options{
		State: statestore.Options{KeySchema: kSchema, ValueSchema: vSchema, MinVersionsToRetain: 3, Allocator: mem},
		Dir:   workA, UploadEvery: 2, MemTableSize: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Restore(context.Background(), 9); err != nil {
		t.Fatalf("the first worker cannot restore version 9: %v", err)
	}
	got := loadAll(t, s, 9)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("restored %v, want %v", got, want)
	}
}
