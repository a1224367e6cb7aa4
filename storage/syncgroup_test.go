package storage_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/storage"
)

// TestSyncGroup pins what a Put under a SyncGroup promises: nothing is in
// place (or synced) until Sync, so readers and a crash see the old objects;
// Sync puts every object in place durably; Abort leaves the old objects
// and no temporary file.
func TestSyncGroup(t *testing.T) {
	ctx := context.Background()
	open := func(t *testing.T) (*faultFS, *storage.Local) {
		ff := &faultFS{FS: newMemFS()}
		s, err := storage.OpenLocal("/ckpt", storage.LocalOptions{FS: ff})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, "state/0/1.delta", []byte("old")); err != nil {
			t.Fatal(err)
		}
		return ff, s
	}
	put := func(t *testing.T, s storage.Store, g *storage.SyncGroup) {
		gctx := storage.WithSyncGroup(ctx, g)
		for name, v := range map[string]string{"state/0/1.delta": "new", "state/1/1.delta": "fresh"} {
			if err := s.Put(gctx, name, []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(t *testing.T, s storage.Store, want map[string]string) {
		t.Helper()
		for name, v := range want {
			got, err := s.Get(ctx, name)
			if v == "" {
				if !storage.IsNotExist(err) {
					t.Errorf("%s: %q %v, want missing", name, got, err)
				}
				continue
			}
			if err != nil || string(got) != v {
				t.Errorf("%s: %q %v, want %q", name, got, err, v)
			}
		}
	}
	before := map[string]string{"state/0/1.delta": "old", "state/1/1.delta": ""}
	after := map[string]string{"state/0/1.delta": "new", "state/1/1.delta": "fresh"}

	t.Run("nothing in place before Sync", func(t *testing.T) {
		ff, s := open(t)
		g := storage.NewSyncGroup()
		n := len(ff.ops)
		put(t, s, g)
		// (A new folder's entry is made durable at once, as for any Put.)
		for _, op := range ff.ops[n:] {
			if strings.HasPrefix(op, "sync ") || strings.HasPrefix(op, "rename") || op == "syncdir 0" || op == "syncdir 1" {
				t.Fatalf("a Put under a group synced or renamed: %v", ff.ops[n:])
			}
		}
		check(t, s, before)
		if infos, err := s.List(ctx, "state/"); err != nil || len(infos) != 1 {
			t.Fatalf("List before Sync: %v %v, want the old object only", infos, err)
		}
		if err := g.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		check(t, s, after)
		ff.FS.(*memFS).Crash()
		s2, err := storage.OpenLocal("/ckpt", storage.LocalOptions{FS: ff.FS})
		if err != nil {
			t.Fatal(err)
		}
		check(t, s2, after) // durable
		// A Put under a group already synced acts at once.
		if err := s.Put(storage.WithSyncGroup(ctx, g), "state/0/1.delta", []byte("late")); err != nil {
			t.Fatal(err)
		}
		check(t, s, map[string]string{"state/0/1.delta": "late"})
	})
	t.Run("a crash before Sync keeps the old objects", func(t *testing.T) {
		ff, s := open(t)
		put(t, s, storage.NewSyncGroup())
		ff.FS.(*memFS).Crash()
		s2, err := storage.OpenLocal("/ckpt", storage.LocalOptions{FS: ff.FS})
		if err != nil {
			t.Fatal(err)
		}
		check(t, s2, before)
		assertNoTemps(t, ff)
	})
	t.Run("Abort", func(t *testing.T) {
		ff, s := open(t)
		g := storage.NewSyncGroup()
		put(t, s, g)
		g.Abort()
		check(t, s, before)
		assertNoTemps(t, ff)
		if err := g.Sync(ctx); err != nil {
			t.Fatalf("Sync after Abort: %v", err)
		}
		check(t, s, before)
	})
	t.Run("a failed sync keeps the old objects", func(t *testing.T) {
		ff, s := open(t)
		g := storage.NewSyncGroup()
		put(t, s, g)
		ff.failAt = ff.calls + 1 // the first fsync of a temporary file
		if err := g.Sync(ctx); !errors.Is(err, errInjected) {
			t.Fatalf("Sync: %v, want the injected error", err)
		}
		check(t, s, before)
		assertNoTemps(t, ff)
	})
	t.Run("nil group", func(t *testing.T) {
		var g *storage.SyncGroup
		if err := g.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		g.Abort()
	})
}

func assertNoTemps(t *testing.T, ff *faultFS) {
	t.Helper()
	var temps []string
	_ = ff.FS.WalkDir("/ckpt", func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".tmp") {
			temps = append(temps, p)
		}
		return nil
	})
	if len(temps) > 0 {
		t.Errorf("temporary files left: %v", temps)
	}
}

// TestSyncGroupBoundsOpenFiles puts more objects under one group than it
// keeps open: every one is still out of place until Sync and in place
// after it, and the process holds at most the bound of extra descriptors
// meanwhile (a batch with hundreds of state partitions once ran out).
func TestSyncGroupBoundsOpenFiles(t *testing.T) {
	ctx := context.Background()
	s, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return -1
		}
		return len(ents)
	}
	before := fds()
	g := storage.NewSyncGroup()
	gctx := storage.WithSyncGroup(ctx, g)
	const n = 300
	for i := range n {
		if err := s.Put(gctx, fmt.Sprintf("state/%d/1.delta", i), []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	if before >= 0 {
		if held := fds() - before; held > 64+8 {
			t.Errorf("%d descriptors held by a group of %d puts, want at most about 64", held, n)
		}
	}
	for _, i := range []int{0, 63, 64, n - 1} {
		if _, err := s.Get(ctx, fmt.Sprintf("state/%d/1.delta", i)); !storage.IsNotExist(err) {
			t.Fatalf("object %d in place before Sync: %v", i, err)
		}
	}
	if err := g.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		got, err := s.Get(ctx, fmt.Sprintf("state/%d/1.delta", i))
		if err != nil || string(got) != strconv.Itoa(i) {
			t.Fatalf("object %d after Sync: %q %v", i, got, err)
		}
	}
}
