package storage_test

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/storage"
)

// faultScenario is one store operation whose outcome the fault and crash
// tests check after a failure at every step it takes.
type faultScenario struct {
	name  string
	setup map[string]string // objects present before the operation
	op    func(ctx context.Context, s storage.Store) error
	obj   string  // the object the operation changes
	old   *string // obj before: nil when absent
	new   *string // obj after the operation succeeds: nil when absent
	// mayExist says the operation may answer ErrExist instead of the
	// injected fault (put-if-absent on a taken name).
	mayExist bool
}

func ptr(s string) *string { return &s }

const (
	oldVal = "old bytes, longer than the new ones so a mix would show"
	newVal = "new bytes"
)

func faultScenarios() []faultScenario {
	return []faultScenario{
		{
			name: "put-if-absent into new folders",
			op: func(ctx context.Context, s storage.Store) error {
				return s.PutIfAbsent(ctx, "a/b/c/obj", []byte(newVal))
			},
			obj: "a/b/c/obj", new: ptr(newVal),
		},
		{
			name:  "put-if-absent on a taken name",
			setup: map[string]string{"commits/1": oldVal},
			op: func(ctx context.Context, s storage.Store) error {
				return s.PutIfAbsent(ctx, "commits/1", []byte(newVal))
			},
			obj: "commits/1", old: ptr(oldVal), new: ptr(oldVal), mayExist: true,
		},
		{
			name:  "put-if-absent beside others",
			setup: map[string]string{"offsets/1": oldVal},
			op: func(ctx context.Context, s storage.Store) error {
				return s.PutIfAbsent(ctx, "offsets/2", []byte(newVal))
			},
			obj: "offsets/2", new: ptr(newVal),
		},
		{
			name: "put into new folders",
			op: func(ctx context.Context, s storage.Store) error {
				return s.Put(ctx, "state/agg/0/1.delta", []byte(newVal))
			},
			obj: "state/agg/0/1.delta", new: ptr(newVal),
		},
		{
			name:  "put over an object",
			setup: map[string]string{"metadata": oldVal},
			op: func(ctx context.Context, s storage.Store) error {
				return s.Put(ctx, "metadata", []byte(newVal))
			},
			obj: "metadata", old: ptr(oldVal), new: ptr(newVal),
		},
		{
			name:  "delete",
			setup: map[string]string{"d/1": oldVal, "d/2": oldVal},
			op: func(ctx context.Context, s storage.Store) error {
				return s.Delete(ctx, "d/1", "d/missing")
			},
			obj: "d/1", old: ptr(oldVal), new: nil,
		},
	}
}

func describe(v *string) string {
	if v == nil {
		return "absent"
	}
	return "«" + *v + "»"
}

// checkOutcome checks the invariants on a store reopened after the
// operation: obj is old or new and whole, and new when the operation
// reported success; no temporary file shows; nothing else changed.
func checkOutcome(t *testing.T, s storage.Store, sc faultScenario, opErr error, ran bool, where string) {
	t.Helper()
	ctx := t.Context()
	b, err := s.Get(ctx, sc.obj)
	var got *string
	switch {
	case err == nil:
		got = ptr(string(b))
	case errors.Is(err, storage.ErrNotExist):
	default:
		t.Fatalf("%s: get %s after reopening: %v", where, sc.obj, err)
	}
	same := func(a, b *string) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }
	if !same(got, sc.old) && !same(got, sc.new) {
		t.Fatalf("%s: %s is %s, want the old %s or the new %s", where, sc.obj, describe(got), describe(sc.old), describe(sc.new))
	}
	if ran && opErr == nil && !same(got, sc.new) {
		t.Fatalf("%s: the operation reported success but %s is %s, want %s", where, sc.obj, describe(got), describe(sc.new))
	}
	if !ran && !same(got, sc.old) {
		t.Fatalf("%s: the store did not open, yet %s is %s", where, sc.obj, describe(got))
	}
	infos, err := s.List(ctx, "")
	if err != nil {
		t.Fatalf("%s: list: %v", where, err)
	}
	for _, in := range infos {
		if strings.HasSuffix(in.Name, ".tmp") {
			t.Fatalf("%s: list shows the temporary file %s", where, in.Name)
		}
		if _, ok := sc.setup[in.Name]; !ok && in.Name != sc.obj {
			t.Fatalf("%s: list shows %s, which nobody wrote", where, in.Name)
		}
	}
	for name, v := range sc.setup {
		if name == sc.obj {
			continue
		}
		if b, err := s.Get(ctx, name); err != nil || string(b) != v {
			t.Fatalf("%s: bystander %s is (%q, %v), want %q", where, name, b, err, v)
		}
	}
}

// checkErr checks an injected fault was reported, not swallowed.
func checkErr(t *testing.T, sc faultScenario, err error, where string) {
	t.Helper()
	if errors.Is(err, errInjected) || (sc.mayExist && errors.Is(err, storage.ErrExist)) {
		return
	}
	t.Fatalf("%s: a fault was injected but the store answered %v", where, err)
}

// TestLocalFaults fails the Nth file-system call, N = 1, 2, … until the
// operation makes fewer calls, on a real directory; after each, the store
// is reopened on the real file system and the invariants checked.
func TestLocalFaults(t *testing.T) {
	for _, sc := range faultScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			ctx := t.Context()
			for n := 1; ; n++ {
				if n > 200 {
					t.Fatal("the operation never ran out of calls to fail")
				}
				dir := filepath.Join(t.TempDir(), "store")
				clean, err := storage.OpenLocal(dir, storage.LocalOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for name, v := range sc.setup {
					if err := clean.Put(ctx, name, []byte(v)); err != nil {
						t.Fatal(err)
					}
				}
				ffs := &faultFS{FS: storage.OSFS{}, failAt: n}
				where := "fault at call " + strconv.Itoa(n)
				var opErr error
				s, err := storage.OpenLocal(dir, storage.LocalOptions{FS: ffs})
				ran := err == nil
				if ran {
					opErr = sc.op(ctx, s)
				} else {
					checkErr(t, sc, err, where+" (open)")
				}
				where += " (" + ffs.op(n) + ")"
				if ran && ffs.injected() {
					checkErr(t, sc, opErr, where)
				}
				if ran && !ffs.injected() && opErr != nil && !(sc.mayExist && errors.Is(opErr, storage.ErrExist)) {
					t.Fatalf("no fault injected, yet: %v", opErr)
				}
				if ran && sc.mayExist && opErr == nil {
					t.Fatalf("%s: put-if-absent on a taken name reported success", where)
				}
				re, err := storage.OpenLocal(dir, storage.LocalOptions{})
				if err != nil {
					t.Fatalf("%s: reopen: %v", where, err)
				}
				checkOutcome(t, re, sc, opErr, ran, where)
				// Reopening removed every temporary file from the disk.
				_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
					if err == nil && strings.HasSuffix(p, ".tmp") {
						t.Fatalf("%s: %s left on disk after reopening", where, p)
					}
					return nil
				})
				if !ffs.injected() {
					t.Logf("%d file-system calls, each failed once", n-1)
					return
				}
			}
		})
	}
}

// TestLocalCrash runs each operation on an in-memory file system that loses
// everything not yet made durable, stopping it at every call in turn (the
// process dies there: that call and all later ones fail) or failing one
// call and letting it go on, then crashes the file system, reopens and
// checks the invariants: in particular an operation that reported success
// survives the crash.
func TestLocalCrash(t *testing.T) {
	const root = "/ckpt"
	modes := []struct {
		name   string
		sticky bool
	}{
		{"die at call N", true},
		{"fail call N then crash", false},
	}
	for _, sc := range faultScenarios() {
		for _, mode := range modes {
			t.Run(sc.name+"/"+mode.name, func(t *testing.T) {
				ctx := t.Context()
				for n := 1; ; n++ {
					if n > 200 {
						t.Fatal("the operation never ran out of calls to fail")
					}
					mem := newMemFS()
					clean, err := storage.OpenLocal(root, storage.LocalOptions{FS: mem})
					if err != nil {
						t.Fatal(err)
					}
					for _, name := range slices.Sorted(maps.Keys(sc.setup)) {
						if err := clean.Put(ctx, name, []byte(sc.setup[name])); err != nil {
							t.Fatal(err)
						}
					}
					mem.Crash() // the setup was reported durable: it must stay
					ffs := &faultFS{FS: mem, failAt: n, sticky: mode.sticky}
					where := "crash with fault at call " + strconv.Itoa(n)
					var opErr error
					s, err := storage.OpenLocal(root, storage.LocalOptions{FS: ffs})
					ran := err == nil
					if ran {
						opErr = sc.op(ctx, s)
					}
					where += " (" + ffs.op(n) + ")"
					if ran && ffs.injected() && !mode.sticky {
						checkErr(t, sc, opErr, where)
					}
					mem.Crash()
					re, err := storage.OpenLocal(root, storage.LocalOptions{FS: mem})
					if err != nil {
						t.Fatalf("%s: reopen: %v", where, err)
					}
					checkOutcome(t, re, sc, opErr, ran, where)
					if ran && sc.mayExist && opErr == nil {
						t.Fatalf("%s: put-if-absent on a taken name reported success", where)
					}
					if !ffs.injected() {
						t.Logf("%d file-system calls", n-1)
						return
					}
				}
			})
		}
	}
}

// TestCrashFSLosesUnsynced shows the crash file system has teeth: a store
// that skips fsync loses a write it reported done.
func TestCrashFSLosesUnsynced(t *testing.T) {
	mem := newMemFS()
	s, err := storage.OpenLocal("/ckpt", storage.LocalOptions{FS: mem, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(t.Context(), "offsets/1", []byte("plan")); err != nil {
		t.Fatal(err)
	}
	mem.Crash()
	re, err := storage.OpenLocal("/ckpt", storage.LocalOptions{FS: mem})
	if err != nil {
		// The root itself was never synced: gone with the rest.
		return
	}
	if b, err := re.Get(t.Context(), "offsets/1"); !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("an unsynced write survived the crash: (%q, %v)", b, err)
	}
}
