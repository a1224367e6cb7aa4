package files

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/internal/fault"
	"github.com/onceflow/onceflow/internal/fault/faulttest"
	"github.com/onceflow/onceflow/storage"
)

const crashChildEnv = "ONCEFLOW_FILES_CRASH_CHILD" // landing|archive|checkpoint|wal

// drive plays the engine: plan with LatestOffset from the last recorded
// end (the wal file), read, record the end, commit; until nothing is new.
// It compacts the files log every 2 entries. It returns the ids read.
func drive(t testing.TB, landingDir, archive, cp, wal string) []int64 {
	ctx := context.Background()
	st, err := storage.OpenLocal(cp, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(landingDir, JSON, payments(), WithMaxFilesPerTrigger(2), WithCleanup(Archive(archive)), WithLogCompactInterval(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.OpenCheckpoint(ctx, storage.Sub(st, "sources/0")); err != nil {
		t.Fatal(err)
	}
	k := int64(-1)
	if b, err := os.ReadFile(wal); err == nil {
		if k, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(ctx, EncodeOffset(k)); err != nil { // the engine's recovery re-commits
			t.Fatal(err)
		}
	}
	var ids []int64
	for {
		off, err := s.LatestOffset(ctx, EncodeOffset(k))
		if err != nil {
			t.Fatal(err)
		}
		next, _ := DecodeOffset(off)
		if next == k {
			return ids
		}
		err = s.Read(ctx, EncodeOffset(k), off, func(rec arrow.RecordBatch) error {
			for i := 0; i < int(rec.NumRows()); i++ {
				ids = append(ids, rec.Column(0).(interface{ Value(int) int64 }).Value(i))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(wal, []byte(strconv.FormatInt(next, 10)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(ctx, off); err != nil {
			t.Fatal(err)
		}
		k = next
	}
}

// TestCrashChild is the process the crash test kills.
func TestCrashChild(t *testing.T) {
	spec := os.Getenv(crashChildEnv)
	if spec == "" {
		t.Skip("run by TestCrashAtFaultPoints")
	}
	p := strings.Split(spec, "|")
	drive(t, p[0], p[1], p[2], p[3])
}

// TestCrashAtFaultPoints kills a real process at each fault point, then
// finishes the run in this one, and checks that every file was taken by
// exactly one entry, read, and archived, and that the compactions left
// only the newest compact entry and the plain entries after it.
func TestCrashAtFaultPoints(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	faulttest.Require(t)
	for _, point := range fault.FilesSourcePoints() {
		for _, hit := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s@%d", point, hit), func(t *testing.T) {
				root := t.TempDir()
				landingDir, archive, cp, wal := filepath.Join(root, "in"), filepath.Join(root, "done"), filepath.Join(root, "cp"), filepath.Join(root, "wal")
				if err := os.Mkdir(landingDir, 0o755); err != nil {
					t.Fatal(err)
				}
				const files = 7 // entries 0…3: compactions through 1 and 3
				for i := range files {
					landing(t, landingDir, fmt.Sprintf("f%d.json", i), fmt.Sprintf(`{"id":%d,"amount_cents":1,"ts":"2026-11-30T10:00:00Z"}`+"\n", i), time.Duration(i)*time.Second)
				}
				cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
				cmd.Env = append(os.Environ(),
					crashChildEnv+"="+strings.Join([]string{landingDir, archive, cp, wal}, "|"),
					fmt.Sprintf("%s=%s@%d", fault.EnvVar, point, hit))
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || !strings.Contains(string(out), "onceflow-fault: "+point) {
					t.Fatalf("child was not killed at %s: %v\n%s", point, err, out)
				}
				drive(t, landingDir, archive, cp, wal)

				// Every file in exactly one entry, entries contiguous.
				st, _ := storage.OpenLocal(cp, storage.LocalOptions{})
				s, _ := New(landingDir, JSON, payments())
				if err := s.OpenCheckpoint(context.Background(), storage.Sub(st, "sources/0")); err != nil {
					t.Fatal(err)
				}
				seen := map[string]int{}
				for k := int64(0); k <= s.mu.latest; k++ {
					e, ok := s.mu.entries[k]
					if !ok {
						t.Fatalf("entry %d missing", k)
					}
					for _, f := range e.Files {
						seen[f.Name]++
					}
				}
				if len(seen) != files {
					t.Fatalf("entries took %v", seen)
				}
				for n, c := range seen {
					if c != 1 {
						t.Fatalf("%s taken %d times", n, c)
					}
				}
				if got := listDir(t, landingDir); got != "[]" {
					t.Fatalf("landing still holds %s", got)
				}
				if got := listDir(t, archive); got != "[f0.json f1.json f2.json f3.json f4.json f5.json f6.json]" {
					t.Fatalf("archive holds %s", got)
				}
				if s.mu.latest != 3 || s.mu.compacted != 3 || s.mu.stale {
					t.Fatalf("latest %d, compacted %d, stale %v; want 3, 3, false", s.mu.latest, s.mu.compacted, s.mu.stale)
				}
				if got := objects(t, st, "sources/0/"); got != "[sources/0/cleanup sources/0/compact/00000000000000000003]" {
					t.Fatalf("checkpoint holds %s", got)
				}
				if mark, err := st.Get(context.Background(), "sources/0/cleanup"); err != nil || string(mark) != `{"version":2,"through":3}` {
					t.Fatalf("cleanup object %s, %v", mark, err)
				}
			})
		}
	}
}

// objects lists the names under prefix in st.
func objects(t testing.TB, st storage.Store, prefix string) string {
	t.Helper()
	infos, err := st.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(infos))
	for i, in := range infos {
		names[i] = in.Name
	}
	return fmt.Sprint(names)
}
