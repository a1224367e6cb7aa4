package files

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/storage"
)

// Regression: files a compaction had forgotten under WithMaxFileAge were
// kept from being taken again only by the age rule of the run's current
// options, so a later run with a larger age or none took them a second
// time (their rows entered twice); now a later run, whatever its options,
// takes nothing old and only each new file, across further compactions.
//
// Before the fix: WithMaxFileAge(d) forgets old entries at compaction, and only the
// listing's age rule (newest − d) keeps their files from being taken again.
// That rule is the option in force now, not the one that forgot: a restart
// with a larger age, or without the option, lists the forgotten files as
// new and takes them a second time (their rows enter twice). A compaction
// must remember how far it forgot, whatever the options of a later run.
func TestForgottenFilesNotRetakenWhenMaxFileAgeChanges(t *testing.T) {
	const step = 5 * time.Second
	for _, tc := range []struct {
		name  string
		later []Option
	}{
		{"age removed", nil},
		{"age raised", []Option{WithMaxFileAge(time.Hour)}},
		{"age raised, interval changed", []Option{WithMaxFileAge(time.Hour), WithLogCompactInterval(3)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			store := checkpoint(t)
			base := []Option{WithMaxFilesPerTrigger(1), WithLogCompactInterval(2)}
			s := open(t, store, dir, JSON, payments(), append(base, WithMaxFileAge(2*step))...)
			k := int64(-1)
			const files = 12
			for i := range files {
				landing(t, dir, fmt.Sprintf("f%02d.json", i), payment(i), time.Duration(i)*step)
				next := latest(t, s, k)
				if next != k+1 {
					t.Fatalf("file %d not taken", i)
				}
				if err := s.Commit(ctx, EncodeOffset(next)); err != nil {
					t.Fatal(err)
				}
				k = next
			}
			if _, ok := s.mu.entries[0]; ok {
				t.Fatal("entry 0 was not forgotten; the test needs it to be")
			}
			// A later run, other options: nothing in the landing directory is
			// new, and a later compaction must not forget that either.
			s = open(t, store, dir, JSON, payments(), append(base, tc.later...)...)
			for range 3 {
				if next := latest(t, s, k); next != k {
					t.Fatalf("entry %d took %s again: files a compaction forgot were taken twice", next, loggedNames(s, next))
				}
				landing(t, dir, fmt.Sprintf("n%02d.json", k), payment(int(k)), time.Duration(k+1)*step)
				next := latest(t, s, k)
				if next != k+1 || loggedNames(s, next) != fmt.Sprintf("[n%02d.json]", k) {
					t.Fatalf("entry %d took %s, want only the new file", next, loggedNames(s, next))
				}
				if err := s.Commit(ctx, EncodeOffset(next)); err != nil {
					t.Fatal(err)
				}
				k = next
				s = open(t, store, dir, JSON, payments(), append(base, tc.later...)...)
			}
		})
	}
}

// hookStore runs hook once, right after the first call of op on a name
// beginning with prefix, as if another process acted in between.
type hookStore struct {
	storage.Store
	op, prefix string
	hook       func()
	done       bool
}

func (h *hookStore) fire(op, name string) {
	if !h.done && op == h.op && strings.HasPrefix(name, h.prefix) {
		h.done = true
		h.hook()
	}
}

func (h *hookStore) List(ctx context.Context, prefix string) ([]storage.ObjectInfo, error) {
	infos, err := h.Store.List(ctx, prefix)
	h.fire("list", prefix)
	return infos, err
}

func (h *hookStore) Get(ctx context.Context, name string) ([]byte, error) {
	b, err := h.Store.Get(ctx, name)
	h.fire("get", name)
	return b, err
}

// Regression: a read-only OpenCheckpoint (the audit, a second driver) that
// a live query's compaction overtook between its listings and its reads
// failed on a sound checkpoint ("no entry", a plain entry "missing" as
// corruption); now the open succeeds and reads every file through the live
// query's latest entry.
//
// Before the fix: the audit opens a live query's checkpoint read-only (audit/doc.go:
// "safe to run next to a live query"), and so may a second driver on an
// object store. OpenCheckpoint lists the compact entries, reads the newest,
// then lists the plain entries; a compaction of the live query in between
// deletes the compact entry it is about to read, or the plain entries
// after it, and OpenCheckpoint failed on a legitimate checkpoint ("no
// entry", "files/… is missing" as corruption). It must read a consistent
// log: the newer compact entry and the plain entries after it.
func TestOpenCheckpointDuringCompactionReadsWholeLog(t *testing.T) {
	for _, tc := range []struct {
		op, prefix string
		plainAfter bool // the hook leaves plain entries after its compaction
	}{
		{"list", compactDir + "/", true}, // then the listed compact entry is deleted
		{"get", compactDir + "/", true},  // then the plain entries after it are
		{"get", compactDir + "/", false}, // then all plain entries are
		{"list", logDir + "/", true},     // then a listed plain entry is
	} {
		t.Run(fmt.Sprintf("%s %s plain after %v", tc.op, tc.prefix, tc.plainAfter), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			store := checkpoint(t)
			opts := []Option{WithMaxFilesPerTrigger(1), WithLogCompactInterval(2)}
			live := open(t, store, dir, JSON, payments(), opts...)
			k, n := int64(-1), 0
			take := func(commit bool) {
				landing(t, dir, fmt.Sprintf("f%02d.json", n), payment(n), time.Duration(n)*time.Second)
				n++
				k = latest(t, live, k)
				if commit {
					if err := live.Commit(ctx, EncodeOffset(k)); err != nil {
						t.Fatal(err)
					}
				}
			}
			for range 5 { // compact/3, files/4
				take(true)
			}
			hs := &hookStore{Store: store, op: tc.op, prefix: tc.prefix, hook: func() {
				take(true) // entry 5: compact/5; files/4, files/5 and compact/3 deleted
				if tc.plainAfter {
					take(false) // entry 6, not committed
					take(false) // entry 7
				}
			}}
			audit, err := New(dir, JSON, payments(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := audit.OpenCheckpoint(ctx, hs); err != nil {
				t.Fatalf("read-only open during a compaction: %v", err)
			}
			if !hs.done {
				t.Fatal("the hook did not run")
			}
			// The engine may have planned through the live source's latest
			// entry: the audit must be able to read that far.
			ids, err := firstColumn(t, audit, -1, k)
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != n {
				t.Fatalf("read %v of %d files", ids, n)
			}
			for i, id := range ids {
				if id != i {
					t.Fatalf("read %v", ids)
				}
			}
		})
	}
}

// copyStore copies every object of src into dst, as ForkCheckpoint copies
// a checkpoint's sources/ folder.
func copyStore(t *testing.T, src, dst storage.Store) {
	t.Helper()
	ctx := context.Background()
	infos, err := src.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		b, err := src.Get(ctx, in.Name)
		if err != nil {
			t.Fatal(err)
		}
		if err := dst.PutIfAbsent(ctx, in.Name, b); err != nil {
			t.Fatal(err)
		}
	}
}

// Regression: under WithMaxFileAge, a fork replaying from below an entry a
// compaction had forgotten got that entry from LatestOffset, so the engine
// wrote into its write-ahead log a batch no Read could run; now
// LatestOffset refuses it with ErrBadOffset naming it forgotten, and a fork
// from a remembered entry replays the entries the original took, its
// commits below the compact entry leave one plain and one compact entry,
// and its log goes on with new files.
//
// Before the fix: a fork (engine.ForkCheckpoint, `onceflow checkpoint fork`)
// copies the files log whole and replays from an end older than the
// newest compact entry: each replayed batch must take the entry the
// original took (from the compact entry, its plain one gone), Commit for
// ends below the compact entry must change nothing, and new files must
// continue the log. With WithMaxFileAge, an entry the compaction forgot
// cannot be replayed: LatestOffset must refuse it before the engine writes
// it into its write-ahead log, where it could never be read.
func TestForkReplaysEntriesBelowCompactEntry(t *testing.T) {
	ctx := context.Background()
	const step = 5 * time.Second
	for _, tc := range []struct {
		name      string
		opts      []Option
		forgotten bool
	}{
		{"keep all", nil, false},
		{"max file age", []Option{WithMaxFileAge(3 * step)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			orig := checkpoint(t)
			opts := append([]Option{WithMaxFilesPerTrigger(1), WithLogCompactInterval(3)}, tc.opts...)
			s := open(t, orig, dir, JSON, payments(), opts...)
			k := int64(-1)
			took := map[int64]string{}
			for i := range 10 {
				landing(t, dir, fmt.Sprintf("f%02d.json", i), payment(i), time.Duration(i)*step)
				k = latest(t, s, k)
				took[k] = loggedNames(s, k)
				if err := s.Commit(ctx, EncodeOffset(k)); err != nil {
					t.Fatal(err)
				}
			}
			if s.mu.compacted != 8 {
				t.Fatalf("compacted through %d, want 8", s.mu.compacted)
			}
			fork := checkpoint(t)
			copyStore(t, orig, fork)
			f := open(t, fork, dir, JSON, payments(), opts...)
			e := int64(1) // the fork replays from the batch after entry 1
			if tc.forgotten {
				if _, ok := f.mu.entries[e+1]; ok {
					t.Fatalf("entry %d was not forgotten; the test needs it to be", e+1)
				}
				_, err := f.LatestOffset(ctx, EncodeOffset(e))
				if !errors.Is(err, ErrBadOffset) || !strings.Contains(err.Error(), "forgotten") {
					t.Fatalf("LatestOffset at a forgotten entry: %v, want ErrBadOffset naming it forgotten", err)
				}
				e = 6 // a fork from a remembered entry still replays
			}
			for ; e < k; e++ {
				next := latest(t, f, e)
				if next != e+1 || loggedNames(f, next) != took[next] {
					t.Fatalf("fork replayed entry %d %s, want %d %s", next, loggedNames(f, next), e+1, took[e+1])
				}
				ids, err := firstColumn(t, f, e, next)
				if err != nil || len(ids) != 1 || ids[0] != int(next) {
					t.Fatalf("fork read entry %d: %v, %v", next, ids, err)
				}
				if err := f.Commit(ctx, EncodeOffset(next)); err != nil {
					t.Fatal(err)
				}
				if plain, compact := logObjects(t, fork); plain != 1 || compact != 1 {
					t.Fatalf("after the fork's commit of %d: %d plain and %d compact entries", next, plain, compact)
				}
			}
			for i := 10; i < 13; i++ { // the fork goes on with new files
				landing(t, dir, fmt.Sprintf("f%02d.json", i), payment(i), time.Duration(i)*step)
				k = latest(t, f, k)
				if loggedNames(f, k) != fmt.Sprintf("[f%02d.json]", i) {
					t.Fatalf("fork entry %d took %s", k, loggedNames(f, k))
				}
				if err := f.Commit(ctx, EncodeOffset(k)); err != nil {
					t.Fatal(err)
				}
			}
			f = open(t, fork, dir, JSON, payments(), opts...)
			from := int64(-1)
			if tc.forgotten {
				from = 8 // the fork's own compaction through 11 forgot up to 7
			}
			ids, err := firstColumn(t, f, from, k)
			if err != nil || len(ids) != int(k-from) || ids[0] != int(from+1) || ids[len(ids)-1] != int(k) {
				t.Fatalf("fork history from %d: %v, %v", from, ids, err)
			}
		})
	}
}

// Regression: a read-only open next to a live query that compacted at every
// commit failed within ten runs, a plain entry "missing" as corruption;
// now every open succeeds and reads the whole history through the latest
// entry it saw.
//
// It opens and reads a checkpoint again and again, read-only as the audit
// does, while a live source compacts it at every commit: every open must
// succeed and read the whole history it saw.
func TestReadOnlyOpenNextToCompactingLiveQuery(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := checkpoint(t)
	opts := []Option{WithMaxFilesPerTrigger(1), WithLogCompactInterval(1)}
	live := open(t, store, dir, JSON, payments(), opts...)
	const batches = 60
	for i := range batches {
		landing(t, dir, fmt.Sprintf("f%03d.json", i), payment(i), time.Duration(i)*time.Second)
	}
	done := make(chan error, 1)
	go func() {
		k := int64(-1)
		for range batches {
			off, err := live.LatestOffset(ctx, EncodeOffset(k))
			if err == nil {
				k, err = DecodeOffset(off)
			}
			if err == nil {
				err = live.Commit(ctx, off)
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	opens := 0
	for finished := false; !finished; opens++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
		audit, err := New(dir, JSON, payments(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := audit.OpenCheckpoint(ctx, store); err != nil {
			t.Fatalf("open %d next to the live query: %v", opens, err)
		}
		ids, err := firstColumn(t, audit, -1, audit.mu.latest)
		if err != nil || len(ids) != int(audit.mu.latest+1) {
			t.Fatalf("open %d read %d rows through entry %d: %v", opens, len(ids), audit.mu.latest, err)
		}
	}
	t.Logf("%d opens next to %d compactions", opens, batches)
}

// Regression: OpenCheckpoint kept the AvailableNow snapshot of an earlier
// run of the same Source, so a second, continuous run never took a file
// landed after it; now the second run takes that file as entry 1.
//
// Before the fix: OpenCheckpoint starts a run, but it kept the AvailableNow
// snapshot of an earlier run of the same Source: a second run under a
// continuous trigger never took a file that landed after the first run's
// PrepareAvailableNow.
func TestOpenCheckpointDropsEarlierAvailableNowSnapshot(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := checkpoint(t)
	s := open(t, store, dir, JSON, payments())
	landing(t, dir, "a.json", payment(1), 0)
	if err := s.PrepareAvailableNow(ctx); err != nil {
		t.Fatal(err)
	}
	if k := latest(t, s, -1); k != 0 {
		t.Fatalf("available-now run took entry %d", k)
	}
	if err := s.Commit(ctx, EncodeOffset(0)); err != nil {
		t.Fatal(err)
	}
	// A second run of the same Source, continuous: no PrepareAvailableNow.
	if err := s.OpenCheckpoint(ctx, store); err != nil {
		t.Fatal(err)
	}
	landing(t, dir, "b.json", payment(2), time.Second)
	if k := latest(t, s, 0); k != 1 || loggedNames(s, 1) != "[b.json]" {
		t.Fatalf("second run took entry %d %s, want 1 [b.json]", k, loggedNames(s, k))
	}
}
