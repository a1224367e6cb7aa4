package pebblestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/statestore/storetest"
	"github.com/onceflow/onceflow/storage"
)

// crash closes the working copy as a SIGKILL would leave it: pebble's WAL
// is off, so what the memtables held is lost.
func (s *Store) crash() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.db != nil {
		_ = s.mu.db.Close() // no Flush: the memtables are dropped
		s.mu.db = nil
	}
	if s.ownCache {
		s.cache.Unref()
		s.ownCache = false
	}
}

// TestModelPebbleBackend runs the backend model test (storetest) against
// the pebble Store: besides the model's own crashes and torn files, a
// restart may lose the memtables (a kill), keep the working copy, lose it
// (another machine: restore from the uploaded snapshot and deltas), or
// find the working copy ahead of the version restored (a crashed attempt
// applied and flushed it).
func TestModelPebbleBackend(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	cache := NewCache(4 << 20)
	defer cache.Unref()
	storetest.Run(t, storetest.Config{Seeds: 3}, func(t testing.TB, dir string, o statestore.Options, committed int64, prev storetest.Store, crashed bool) storetest.Store {
		work := filepath.Join(dir+".work", "p0")
		if p, ok := prev.(*Store); ok {
			if crashed {
				p.crash()
			} else if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			work = p.opts.Dir
		}
		if committed == -2 {
			return nil
		}
		switch rng.IntN(5) {
		case 0: // another machine: no working copy
			work = filepath.Join(dir+".work", fmt.Sprint("m", rng.Uint32()))
		case 1: // the working copy was lost
			if err := os.RemoveAll(work); err != nil {
				t.Fatal(err)
			}
		}
		st, err := storage.OpenLocal(dir, storage.LocalOptions{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		s, err := Open(context.Background(), st, Options{
			State:          o,
			Dir:            work,
			Cache:          cache,
			MemTableSize:   1 << 20,
			UploadEvery:    1 + rng.IntN(6),
			MaxSSTableSize: 1 << 20,
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Restore(context.Background(), committed); err != nil {
			t.Fatal(err)
		}
		return s
	})
}
