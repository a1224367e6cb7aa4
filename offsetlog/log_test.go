package offsetlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/onceflow/onceflow/storage"
)

type entry struct {
	Batch int64  `json:"batch"`
	Note  string `json:"note"`
}

func newLog(t *testing.T) (*Log[entry], storage.Store) {
	t.Helper()
	st, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return New[entry](st, "offsets"), st
}

func TestAddGetLatestList(t *testing.T) {
	ctx := context.Background()
	l, _ := newLog(t)
	if _, _, ok, err := l.Latest(ctx); ok || err != nil {
		t.Fatalf("empty log: ok=%v err=%v", ok, err)
	}
	for _, id := range []int64{0, 1, 2, 5, 10} { // gaps are allowed and listed as they are
		if err := l.Add(ctx, id, entry{Batch: id, Note: fmt.Sprint("n", id)}); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := l.List(ctx)
	if err != nil || fmt.Sprint(ids) != "[0 1 2 5 10]" {
		t.Fatalf("List = %v, %v", ids, err)
	}
	id, e, ok, err := l.Latest(ctx)
	if err != nil || !ok || id != 10 || e.Note != "n10" {
		t.Fatalf("Latest = %d %+v %v %v", id, e, ok, err)
	}
	if _, err := l.Get(ctx, 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(3) on a gap: %v, want ErrNotFound", err)
	}
	has, err := l.Has(ctx, 5)
	if err != nil || !has {
		t.Fatalf("Has(5) = %v, %v", has, err)
	}
}

func TestAddIsPutIfAbsent(t *testing.T) {
	ctx := context.Background()
	l, _ := newLog(t)
	if err := l.Add(ctx, 7, entry{Batch: 7, Note: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Add(ctx, 7, entry{Batch: 7, Note: "a"}); err != nil {
		t.Fatalf("re-adding the same entry: %v, want nil", err)
	}
	err := l.Add(ctx, 7, entry{Batch: 7, Note: "b"})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("adding other content: %v, want ErrConflict", err)
	}
	if e, _ := l.Get(ctx, 7); e.Note != "a" {
		t.Fatalf("entry changed to %+v", e)
	}
	if err := l.Add(ctx, -1, entry{}); err == nil {
		t.Fatal("negative batch id accepted")
	}
}

func TestConcurrentAddOneWinner(t *testing.T) {
	ctx := context.Background()
	l, _ := newLog(t)
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.Add(ctx, 1, entry{Batch: 1, Note: fmt.Sprint("writer", i)})
		}()
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, ErrConflict):
			t.Fatalf("unexpected error %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d writers won, want 1", wins)
	}
}

func TestCorruptEntries(t *testing.T) {
	ctx := context.Background()
	cases := map[string]string{
		"empty file":        "",
		"torn version line": "v",
		"torn entry":        "v1\n{\"batch\":3,\"no",
		"no final newline":  "v1\n{\"batch\":3}",
		"bad json":          "v1\n{\"batch\":three}\n",
		"future version":    "v9\n{\"batch\":3}\n",
		"not a version":     "hello\n{}\n",
		"unknown field":     "v1\n{\"batch\":3,\"surprise\":1}\n",
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			l, st := newLog(t)
			if err := st.Put(ctx, FileName("offsets", 3), []byte(content)); err != nil {
				t.Fatal(err)
			}
			_, err := l.Get(ctx, 3)
			var ce *CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want a CorruptionError", err)
			}
			if !strings.Contains(err.Error(), "offsets/00000000000000000003") {
				t.Fatalf("error does not name the file: %v", err)
			}
			if _, _, _, err := l.Latest(ctx); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Latest over a corrupt newest entry: %v", err)
			}
		})
	}
}

func TestPurge(t *testing.T) {
	ctx := context.Background()
	l, st := newLog(t)
	for id := int64(0); id < 10; id++ {
		if err := l.Add(ctx, id, entry{Batch: id}); err != nil {
			t.Fatal(err)
		}
	}
	// A stray object in the folder is neither listed nor purged.
	if err := st.Put(ctx, "offsets/README", []byte("x")); err != nil {
		t.Fatal(err)
	}
	n, err := l.Purge(ctx, 7)
	if err != nil || n != 7 {
		t.Fatalf("Purge = %d, %v", n, err)
	}
	ids, _ := l.List(ctx)
	if fmt.Sprint(ids) != "[7 8 9]" {
		t.Fatalf("after purge: %v", ids)
	}
	if _, err := st.Get(ctx, "offsets/README"); err != nil {
		t.Fatalf("stray object purged: %v", err)
	}
	if n, err := l.Purge(ctx, 7); n != 0 || err != nil {
		t.Fatalf("second purge = %d, %v", n, err)
	}
}

func TestFileNames(t *testing.T) {
	if got := FileName("commits", 42); got != "commits/00000000000000000042" {
		t.Fatalf("FileName = %s", got)
	}
	for name, want := range map[string]int64{"commits/00000000000000000042": 42, "commits/42": 42} {
		if id, ok := ParseFileName("commits", name); !ok || id != want {
			t.Fatalf("ParseFileName(%s) = %d %v", name, id, ok)
		}
	}
	for _, bad := range []string{"commits/", "commits/4x", "offsets/1", "commits/a/1", "commits/99999999999999999999"} {
		if _, ok := ParseFileName("commits", bad); ok {
			t.Fatalf("ParseFileName(%s) accepted", bad)
		}
	}
}
