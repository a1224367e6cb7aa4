package pebblestore

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

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

// TestReviewPartialApplyIsNotCommittedState: a version whose changes
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
