package files

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// change is one way a landing file changes after it was taken.
type change struct {
	name string
	do   func(t *testing.T, path string)
	// sizeNow is the size after the change (the taken size is
	// len(takenContent)); mtimes says whether the modification time moved.
	sizeNow int64
	mtimes  bool
}

const (
	takenLine    = `{"id":1,"amount_cents":1250,"ts":"2026-11-30T10:00:00Z"}` + "\n"
	appendedLine = `{"id":2,"amount_cents":990,"ts":"2026-11-30T10:00:00Z"}` + "\n"
)

var takenContent = takenLine + takenLine

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func setMtime(t *testing.T, path string, mt time.Time) {
	t.Helper()
	if err := os.Chtimes(path, mt, mt); err != nil {
		t.Fatal(err)
	}
}

func changes() []change {
	sameSize := strings.Replace(takenContent, `"amount_cents":1250`, `"amount_cents":9999`, 1)
	return []change{
		{"appended after a newline-terminated take", func(t *testing.T, p string) {
			appendTo(t, p, appendedLine)
			setMtime(t, p, t0.Add(time.Minute))
		}, int64(len(takenContent) + len(appendedLine)), true},
		{"appended keeping the modification time", func(t *testing.T, p string) {
			appendTo(t, p, appendedLine)
			setMtime(t, p, t0)
		}, int64(len(takenContent) + len(appendedLine)), false},
		{"truncated", func(t *testing.T, p string) {
			if err := os.Truncate(p, int64(len(takenLine))); err != nil {
				t.Fatal(err)
			}
			setMtime(t, p, t0.Add(time.Minute))
		}, int64(len(takenLine)), true},
		{"rewritten with the same size and a new modification time", func(t *testing.T, p string) {
			landing(t, filepath.Dir(p), filepath.Base(p), sameSize, time.Minute)
		}, int64(len(sameSize)), true},
		{"touched: same bytes, new modification time", func(t *testing.T, p string) {
			setMtime(t, p, t0.Add(time.Minute))
		}, int64(len(takenContent)), true},
	}
}

// TestTakenFileChangedFailsTheBatch pins that a batch never reads a taken
// file other than as it was taken. Regression: bytes appended to a taken
// file whose taken bytes ended in a newline were silently never read (the
// batch read the taken bytes, and the name was never taken again); a file
// rewritten with the same size was read with its new content. Now any
// change of size or modification time fails Read with ErrFileChanged
// naming the file, both sizes and both modification times.
func TestTakenFileChangedFailsTheBatch(t *testing.T) {
	for _, tc := range changes() {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			landing(t, dir, "a.json", takenContent, 0)
			s := open(t, checkpoint(t), dir, JSON, payments())
			latest(t, s, -1)
			path := filepath.Join(dir, "a.json")
			tc.do(t, path)
			got, err := rows(t, s, -1, 0)
			if !errors.Is(err, ErrFileChanged) {
				t.Fatalf("rows %v, err %v; want ErrFileChanged", got, err)
			}
			msg := err.Error()
			for _, want := range []string{path, fmt.Sprintf("%d bytes", len(takenContent)), fmt.Sprintf("%d", tc.sizeNow)} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not name %q", msg, want)
				}
			}
			if tc.mtimes {
				for _, want := range []string{t0.Format(time.RFC3339Nano), t0.Add(time.Minute).Format(time.RFC3339Nano)} {
					if !strings.Contains(msg, want) {
						t.Errorf("error %q does not name the modification time %s", msg, want)
					}
				}
			}
		})
	}
}

// TestRewriteKeepingSizeAndModTimeFailsTheBatch: a writer that rewrites a
// taken file in place and restores its modification time (cp -p, rsync -t,
// touch -r) leaves size and modification time as taken. Regression: the
// batch read the new content as if it were the taken one; now the files
// log records the XXH64 of the taken bytes and Read refuses other bytes.
func TestRewriteKeepingSizeAndModTimeFailsTheBatch(t *testing.T) {
	dir := t.TempDir()
	landing(t, dir, "a.json", takenContent, 0)
	s := open(t, checkpoint(t), dir, JSON, payments())
	latest(t, s, -1)
	landing(t, dir, "a.json", strings.Replace(takenContent, "1250", "9999", 1), 0)
	got, err := rows(t, s, -1, 0)
	if !errors.Is(err, ErrFileChanged) || !strings.Contains(err.Error(), "xxh64") {
		t.Fatalf("rows %v, err %v; want ErrFileChanged naming the digest", got, err)
	}
}

// TestReplayOfTheBatchThatTookAChangedFile: batch 0 read a file, the
// process died before the batch committed, and the file changed before the
// restart. Regression: the re-run read the taken bytes as if nothing had
// happened, and the appended bytes were never read. Now the re-run fails,
// so the query stops before anything is lost.
func TestReplayOfTheBatchThatTookAChangedFile(t *testing.T) {
	for _, tc := range changes() {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			store := checkpoint(t)
			landing(t, dir, "a.json", takenContent, 0)
			s := open(t, store, dir, JSON, payments())
			latest(t, s, -1)
			if got := mustRows(t, s, -1, 0); len(got) != 2 {
				t.Fatalf("first attempt %v", got)
			}
			tc.do(t, filepath.Join(dir, "a.json"))
			s = open(t, store, dir, JSON, payments()) // the restart
			if k := latest(t, s, -1); k != 0 {
				t.Fatalf("restart planned %d, want the logged entry 0", k)
			}
			if got, err := rows(t, s, -1, 0); !errors.Is(err, ErrFileChanged) {
				t.Fatalf("re-run rows %v, err %v; want ErrFileChanged", got, err)
			}
		})
	}
}

// TestChangeAfterTheBatchFailsTheNextPlan: a file changed after its batch
// read it and committed. Regression: the listing skipped the taken name
// and the new bytes were never read, silently; now LatestOffset fails with
// ErrFileChanged naming the file and the entry that took it.
func TestChangeAfterTheBatchFailsTheNextPlan(t *testing.T) {
	for _, tc := range changes() {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sizeNow == int64(len(takenContent)) && !tc.mtimes {
				t.Skip("no visible change")
			}
			dir := t.TempDir()
			landing(t, dir, "a.json", takenContent, 0)
			s := open(t, checkpoint(t), dir, JSON, payments())
			latest(t, s, -1)
			mustRows(t, s, -1, 0)
			if err := s.Commit(context.Background(), EncodeOffset(0)); err != nil {
				t.Fatal(err)
			}
			tc.do(t, filepath.Join(dir, "a.json"))
			off, err := s.LatestOffset(context.Background(), EncodeOffset(0))
			if !errors.Is(err, ErrFileChanged) {
				t.Fatalf("LatestOffset %s, %v; want ErrFileChanged", off, err)
			}
			if msg := err.Error(); !strings.Contains(msg, filepath.Join(dir, "a.json")) || !strings.Contains(msg, "entry 0") {
				t.Fatalf("error %q does not name the file and the entry that took it", msg)
			}
		})
	}
}

// TestChangedFileGoesToTheDeadLetter: with WithDeadLetter, a file changed
// after its batch committed is logged by the next entry, and Read of that
// entry copies the bytes no batch read to the dead-letter directory —
// bytes taken..now when the taken bytes are intact, the whole file when
// they are not — deterministically: a re-run writes the same bytes, and a
// restart (and a compaction) keeps the record, so nothing is copied twice.
func TestChangedFileGoesToTheDeadLetter(t *testing.T) {
	ctx := context.Background()
	for _, tc := range changes() {
		t.Run(tc.name, func(t *testing.T) {
			dir, dead := t.TempDir(), t.TempDir()
			store := checkpoint(t)
			opts := []Option{WithDeadLetter(dead), WithLogCompactInterval(2)}
			landing(t, dir, "a.json", takenContent, 0)
			s := open(t, store, dir, JSON, payments(), opts...)
			latest(t, s, -1)
			mustRows(t, s, -1, 0)
			if err := s.Commit(ctx, EncodeOffset(0)); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "a.json")
			tc.do(t, path)
			now, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if k := latest(t, s, 0); k != 1 {
				t.Fatalf("the change was not logged: latest %d", k)
			}
			intact := strings.HasPrefix(string(now), takenContent)
			var wantCopy string
			switch {
			case intact:
				wantCopy = string(now[len(takenContent):])
			default:
				wantCopy = string(now)
			}
			check := func(s *Source) {
				t.Helper()
				if got := mustRows(t, s, 0, 1); len(got) != 0 {
					t.Fatalf("a changed file's entry emitted rows %v", got)
				}
				jl, err := os.ReadFile(filepath.Join(dead, DeadLetterName(1)))
				if err != nil {
					t.Fatal(err)
				}
				var d deadLetter
				if err := json.Unmarshal(jl, &d); err != nil || d.File != path || d.Line != 0 || !strings.Contains(d.Reason, "entry 0 recorded it") {
					t.Fatalf("dead letter %s: %+v %v", jl, d, err)
				}
				copied, err := os.ReadFile(filepath.Join(dead, ChangedName(1, 0)))
				if wantCopy == "" {
					if d.Copy != "" || !os.IsNotExist(err) {
						t.Fatalf("nothing is unread, yet dead letter %s and copy %q (%v)", jl, copied, err)
					}
					return
				}
				if err != nil || string(copied) != wantCopy || d.Copy != ChangedName(1, 0) {
					t.Fatalf("copy %q (%v) in %s, want %q", copied, err, jl, wantCopy)
				}
			}
			check(s)
			check(s) // a re-run
			if err := s.Commit(ctx, EncodeOffset(1)); err != nil {
				t.Fatal(err) // compacts entries 0 and 1
			}
			s = open(t, store, dir, JSON, payments(), opts...)
			if k := latest(t, s, 1); k != 1 {
				t.Fatalf("after a restart the same change was logged again: latest %d", k)
			}
			check(s) // a re-read from the compacted log
			appendTo(t, path, appendedLine)
			if k := latest(t, s, 1); k != 2 {
				t.Fatalf("a second change was not logged: latest %d", k)
			}
			if got := mustRows(t, s, 1, 2); len(got) != 0 {
				t.Fatalf("rows %v", got)
			}
			if copied, err := os.ReadFile(filepath.Join(dead, ChangedName(2, 0))); err != nil || string(copied) != appendedLine {
				t.Fatalf("second copy %q, %v; want only the bytes after the first change", copied, err)
			}
		})
	}
}

// TestDeadLetterReadsTheTakenBytesOfAChangedFile: with WithDeadLetter, a
// batch whose file changed between its take and its read (or before a
// re-run) reads the taken bytes when they are still there, so every
// attempt emits the same rows, and the next listing dead-letters the rest;
// when the taken bytes are gone the batch fails, even with a dead-letter
// directory, since no attempt could emit what the first one did.
func TestDeadLetterReadsTheTakenBytesOfAChangedFile(t *testing.T) {
	for _, tc := range changes() {
		t.Run(tc.name, func(t *testing.T) {
			dir, dead := t.TempDir(), t.TempDir()
			store := checkpoint(t)
			landing(t, dir, "a.json", takenContent, 0)
			s := open(t, store, dir, JSON, payments(), WithDeadLetter(dead))
			latest(t, s, -1)
			first := mustRows(t, s, -1, 0)
			path := filepath.Join(dir, "a.json")
			tc.do(t, path)
			now, _ := os.ReadFile(path)
			s = open(t, store, dir, JSON, payments(), WithDeadLetter(dead)) // the restart
			got, err := rows(t, s, -1, 0)
			if !strings.HasPrefix(string(now), takenContent) {
				if !errors.Is(err, ErrFileChanged) || !strings.Contains(err.Error(), "a.json") {
					t.Fatalf("taken bytes gone: rows %v, err %v; want ErrFileChanged", got, err)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != fmt.Sprint(first) {
				t.Fatalf("re-run rows %v, %v; want the first attempt's %v", got, err, first)
			}
			if des, _ := os.ReadDir(dead); len(des) != 0 {
				t.Fatalf("the batch that took the file dead-lettered %d files", len(des))
			}
			if k := latest(t, s, 0); k != 1 {
				t.Fatalf("the change was not logged: latest %d", k)
			}
		})
	}
}

// TestTornTakeThatGrewFailsEvenWithDeadLetter: the taken bytes end inside
// a line and the file grew, so the last taken line was cut: it cannot be
// read as taken (a part of a value) nor skipped (a first attempt may have
// emitted it), so the batch fails.
func TestTornTakeThatGrewFailsEvenWithDeadLetter(t *testing.T) {
	dir := t.TempDir()
	landing(t, dir, "a.json", takenLine+`{"id":7,"amount_cents":12`, 0)
	s := open(t, checkpoint(t), dir, JSON, payments(), WithDeadLetter(t.TempDir()))
	latest(t, s, -1)
	appendTo(t, filepath.Join(dir, "a.json"), `50,"ts":"2026-11-30T10:00:00Z"}`+"\n")
	if got, err := rows(t, s, -1, 0); !errors.Is(err, ErrFileChanged) || !strings.Contains(err.Error(), "cut") {
		t.Fatalf("rows %v, err %v; want ErrFileChanged saying the last line was cut", got, err)
	}
}

// TestChangedEntryNeedsTheDeadLetter: an entry that logged a changed file
// cannot be read without a dead-letter directory.
func TestChangedEntryNeedsTheDeadLetter(t *testing.T) {
	dir, dead := t.TempDir(), t.TempDir()
	store := checkpoint(t)
	landing(t, dir, "a.json", takenContent, 0)
	s := open(t, store, dir, JSON, payments(), WithDeadLetter(dead))
	latest(t, s, -1)
	appendTo(t, filepath.Join(dir, "a.json"), appendedLine)
	latest(t, s, 0)
	s = open(t, store, dir, JSON, payments())
	if _, err := rows(t, s, 0, 1); !errors.Is(err, ErrFileChanged) || !strings.Contains(err.Error(), "WithDeadLetter") {
		t.Fatalf("err %v, want ErrFileChanged asking for WithDeadLetter", err)
	}
}

// TestAvailableNowLogsOnlyChangesBeforeItsListing: a file that changes
// again while an AvailableNow run goes on is left to the next run, so the
// run ends even next to a writer that keeps appending.
func TestAvailableNowLogsOnlyChangesBeforeItsListing(t *testing.T) {
	dir := t.TempDir()
	landing(t, dir, "a.json", takenContent, 0)
	s := open(t, checkpoint(t), dir, JSON, payments(), WithDeadLetter(t.TempDir()))
	latest(t, s, -1)
	path := filepath.Join(dir, "a.json")
	appendTo(t, path, appendedLine)
	if err := s.PrepareAvailableNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k := latest(t, s, 0); k != 1 {
		t.Fatalf("the change before the run was not logged: latest %d", k)
	}
	appendTo(t, path, appendedLine)
	if k := latest(t, s, 1); k != 1 {
		t.Fatalf("a change during the run was logged: latest %d", k)
	}
}

// TestReappearedNameUnderArchiveCleanup: a taken file was archived after
// its batch committed and a new file lands under its name. It is a change
// (the whole new file goes to the dead letter), its cleanup never replaces
// the archived original, and a re-read of the first batch still reads the
// original from the archive.
func TestReappearedNameUnderArchiveCleanup(t *testing.T) {
	ctx := context.Background()
	dir, dead, archive := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "done")
	landing(t, dir, "a.json", takenContent, 0)
	s := open(t, checkpoint(t), dir, JSON, payments(), WithDeadLetter(dead), WithCleanup(Archive(archive)))
	latest(t, s, -1)
	first := mustRows(t, s, -1, 0)
	if err := s.Commit(ctx, EncodeOffset(0)); err != nil {
		t.Fatal(err)
	}
	landing(t, dir, "a.json", appendedLine, time.Hour)
	if k := latest(t, s, 0); k != 1 {
		t.Fatalf("the reappeared name was not logged: latest %d", k)
	}
	mustRows(t, s, 0, 1)
	if copied, err := os.ReadFile(filepath.Join(dead, ChangedName(1, 0))); err != nil || string(copied) != appendedLine {
		t.Fatalf("copy %q, %v; want the whole new file", copied, err)
	}
	if err := s.Commit(ctx, EncodeOffset(1)); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(archive, "a.json")); err != nil || string(data) != takenContent {
		t.Fatalf("archive holds %q, %v; want the original", data, err)
	}
	if got := listDir(t, dir); got != "[a.json]" {
		t.Fatalf("landing holds %s, want the new a.json kept in place", got)
	}
	if got := mustRows(t, s, -1, 0); fmt.Sprint(got) != fmt.Sprint(first) {
		t.Fatalf("re-read %v, want %v from the archive", got, first)
	}
	if k := latest(t, s, 1); k != 1 {
		t.Fatalf("nothing changed, yet latest %d", k)
	}
}

// TestOtherBytesFailInEveryFormat: one byte of a taken file differs, size
// and modification time kept; every format refuses the batch with
// ErrFileChanged (JSON also when the byte makes a line malformed: the
// cause is the change, not the input).
func TestOtherBytesFailInEveryFormat(t *testing.T) {
	tests := []struct {
		format Format
		name   string
		write  func(t *testing.T, dir string)
	}{
		{JSON, "a.json", func(t *testing.T, dir string) { landing(t, dir, "a.json", takenContent, 0) }},
		{CSV, "a.csv", func(t *testing.T, dir string) {
			landing(t, dir, "a.csv", "id,amount_cents,name,ts\n1,1250,x,2026-11-30T10:00:00Z\n2,990,y,2026-11-30T10:00:00Z\n", 0)
		}},
		{Parquet, "a.parquet", func(t *testing.T, dir string) {
			name := "x"
			writeParquet(t, dir, "a.parquet", []pqPayment{{1, 1250, &name, t0.UnixMilli(), 0}, {2, 990, nil, t0.UnixMilli(), 0}})
			setMtime(t, filepath.Join(dir, "a.parquet"), t0)
		}},
	}
	for _, tc := range tests {
		for _, at := range []string{"a digit", "the middle"} {
			t.Run(tc.name+"/"+at, func(t *testing.T) {
				dir := t.TempDir()
				tc.write(t, dir)
				s := open(t, checkpoint(t), dir, tc.format, payments())
				latest(t, s, -1)
				path := filepath.Join(dir, tc.name)
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				i := len(data) / 2
				switch {
				case at == "a digit" && tc.format == Parquet:
					i = len(data) / 3
				case at == "a digit":
					i = strings.Index(string(data), "1250") + 1
				}
				data[i] ^= 0x01
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
				setMtime(t, path, t0)
				if got, err := rows(t, s, -1, 0); !errors.Is(err, ErrFileChanged) {
					t.Fatalf("rows %v, err %v; want ErrFileChanged", got, err)
				}
			})
		}
	}
}

// TestDigestIsCanonicalXXH64: the files log records XXH64 (seed 0) as 16
// hex digits in the order xxhsum -H1 prints, so an operator can check a
// file against its record.
func TestDigestIsCanonicalXXH64(t *testing.T) {
	dir := t.TempDir()
	landing(t, dir, "abc.json", "abc", 0)
	landing(t, dir, "empty.json", "", time.Second)
	s := open(t, checkpoint(t), dir, JSON, payments())
	latest(t, s, -1)
	s.mu.Lock()
	fs := s.mu.entries[0].Files
	s.mu.Unlock()
	if got := fmt.Sprintf("%s=%s %s=%s", fs[0].Name, fs[0].XXH64, fs[1].Name, fs[1].XXH64); got != "abc.json=44bc2cf5ad770999 empty.json=ef46db3751d8e999" {
		t.Fatalf("digests %s", got)
	}
}
