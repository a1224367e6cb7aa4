package storage_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/onceflow/onceflow/storage"
	"github.com/onceflow/onceflow/storage/storagetest"
)

func TestLocalConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		s, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestOpenLocalTemps checks which temporary files OpenLocal removes: those
// of dead processes, of this one, and nameless ones; not those of another
// live process (a running driver's write in flight).
func TestOpenLocalTemps(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip("no `true` command to get a dead pid from")
	}
	dir := t.TempDir()
	files := []struct {
		name string
		keep bool
	}{
		{"obj.1.7.tmp", true}, // pid 1 is always running
		{"a/obj." + strconv.Itoa(os.Getpid()) + ".3.tmp", false},
		{"a/b/obj." + strconv.Itoa(dead.Process.Pid) + ".1.tmp", false},
		{"junk.tmp", false},
		{"a/obj.x.y.tmp", false},
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		_, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.name)))
		if kept := err == nil; kept != f.keep {
			t.Errorf("%s: kept %v, want %v", f.name, kept, f.keep)
		}
	}
	infos, err := s.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 0 {
		t.Fatalf("list shows temporary files: %+v", infos)
	}
}
