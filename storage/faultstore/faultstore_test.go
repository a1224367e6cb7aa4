package faultstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/onceflow/onceflow/storage"
	"github.com/onceflow/onceflow/storage/faultstore"
	"github.com/onceflow/onceflow/storage/storagetest"
)

func mustInjector(t *testing.T, spec string) *faultstore.Injector {
	t.Helper()
	cfg, err := faultstore.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	in, err := faultstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// openLocal is the inner store of the Store tests, which check the
// wrapper's logic, not the disk: it skips fsync (the FS tests do not).
func openLocal(t *testing.T) *storage.Local {
	t.Helper()
	l, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestWrapIsTransparent runs the storage conformance suite on a local
// store wrapped at both layers with rules that never match.
func TestWrapIsTransparent(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		s, err := faultstore.OpenLocal(t.TempDir(), mustInjector(t, "op=any path=nowhere/** fault=eio"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestParse(t *testing.T) {
	cases := []struct {
		spec  string
		seed  uint64
		rules []string // Rule.String of each
	}{
		{"", 0, nil},
		{"seed=7; op=put-if-absent path=commits/* nth=3 fault=eio", 7, []string{"op=put-if-absent path=commits/* nth=3 fault=eio"}},
		{"op=write|delete p=0.25 fault=syncfail times=4 ; op=get fault=slow delay=250ms", 0,
			[]string{"op=put-if-absent|put|delete times=4 p=0.25 fault=syncfail", "op=get fault=slow delay=250ms"}},
		{"op=fs.write path=state/** fault=torn", 0, []string{"op=fs.write path=state/** fault=torn"}},
		{"fault=enospc", 0, []string{"op=store fault=enospc"}},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			cfg, err := faultstore.Parse(c.spec)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range cfg.Rules {
				got = append(got, r.String())
			}
			if cfg.Seed != c.seed || !slices.Equal(got, c.rules) {
				t.Errorf("Parse(%q) = seed %d, rules %q; want seed %d, rules %q", c.spec, cfg.Seed, got, c.seed, c.rules)
			}
			// What String prints parses back to the same rules.
			for i, r := range cfg.Rules {
				again, err := faultstore.Parse(r.String())
				if err != nil || len(again.Rules) != 1 || again.Rules[0] != r {
					t.Errorf("rule %d %q does not parse back: %+v, %v", i, r, again.Rules, err)
				}
			}
		})
	}
}

// TestParseErrors checks that a bad spec names the clause, the field and
// the way out.
func TestParseErrors(t *testing.T) {
	cases := []struct{ spec, want string }{
		{"op=put fault=eio; op=gett fault=eio", `clause 2 "op=gett fault=eio": field "op=gett": unknown operation "gett" (want put-if-absent`},
		{"op=put", `clause 1 "op=put": no fault= field`},
		{"op=put nth=0 fault=eio", `field "nth=0": "0" is not a positive integer`},
		{"op=put p=1.5 fault=eio", `field "p=1.5": 1.5 is outside (0, 1]`},
		{"op=put fault=boom", `unknown fault "boom" (want enospc, eio, torn, syncfail or slow)`},
		{"op=put fault=eio color=red", `field "color=red": unknown key`},
		{"seed=x", `seed "x" is not an unsigned integer`},
		{"op=put fault=eio nonsense", `field "nonsense" is not key=value`},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			_, err := faultstore.Parse(c.spec)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse(%q) = %v, want an error containing %q", c.spec, err, c.want)
			}
		})
	}
}

// TestNewRefusesRulesThatCannotApply checks the rules a fault cannot
// honour, all reported at once.
func TestNewRefusesRulesThatCannotApply(t *testing.T) {
	cfg, err := faultstore.Parse("op=get fault=torn; op=put fault=slow; op=fs.sync fault=syncfail; op=put path=[ fault=eio")
	if err != nil {
		t.Fatal(err)
	}
	_, err = faultstore.New(cfg)
	for _, want := range []string{
		"rule 1 (op=get fault=torn): torn cuts writes only",
		"rule 2 (op=put fault=slow): slow needs a positive delay",
		"rule 3 (op=fs.sync fault=syncfail): syncfail applies to store changes only",
		"rule 4 (op=put path=[ fault=eio): path \"[\"",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v\nwant it to contain %q", err, want)
		}
	}
}

func TestPathGlob(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"", "anything/at/all", true},
		{"commits/*", "commits/00000000000000000003", true},
		{"commits/*", "offsets/00000000000000000003", false},
		{"commits/*", "commits/a/b", false},
		{"state/**", "state/merchant-totals/3/7.delta", true},
		{"state/**", "state", true},
		{"**/*.parquet", "day=1/part-0.zstd.parquet", true},
		{"**/*.parquet", "part-0.zstd.parquet", true},
		{"**/*.parquet", "_onceflow_log/00000000000000000004", false},
		{"_onceflow_log/*.compact", "_onceflow_log/00000000000000000004.compact", true},
		{"offsets/0000000000000000000[13]", "offsets/00000000000000000003", true},
	}
	for _, c := range cases {
		t.Run(c.pattern+" "+c.name, func(t *testing.T) {
			s := faultstore.Wrap(openLocal(t), mustInjector(t, "op=get path="+c.pattern+" fault=eio"))
			_, err := s.Get(context.Background(), c.name)
			if got := errors.Is(err, faultstore.ErrInjected); got != c.want {
				t.Errorf("%q matches %q: %v, want %v (err %v)", c.pattern, c.name, got, c.want, err)
			}
		})
	}
}

const payload = "a payload long enough that cutting it shows"

// TestStoreFaults checks what each fault does to each store call: the
// error the caller sees and what the inner store holds afterwards.
func TestStoreFaults(t *testing.T) {
	type outcome int
	const (
		absent outcome = iota // the object is not there
		whole                 // the object holds the payload
		cut                   // the object holds a strict prefix of the payload
		before                // the object holds what it held before the call
	)
	cases := []struct {
		name    string
		spec    string
		setup   bool // "obj" holds "old" before the call
		call    func(ctx context.Context, s storage.Store) error
		wantErr error // nil: the call succeeds
		after   outcome
	}{
		{"put-if-absent enospc", "op=put-if-absent fault=enospc", false, putIfAbsent, syscall.ENOSPC, absent},
		{"put-if-absent eio", "op=put-if-absent fault=eio", false, putIfAbsent, syscall.EIO, absent},
		{"put-if-absent torn", "op=put-if-absent fault=torn", false, putIfAbsent, io.ErrShortWrite, cut},
		{"put-if-absent syncfail", "op=put-if-absent fault=syncfail", false, putIfAbsent, syscall.EIO, whole},
		{"put-if-absent slow", "op=put-if-absent fault=slow delay=1ms", false, putIfAbsent, nil, whole},
		{"put eio keeps the old object", "op=put fault=eio", true, put, syscall.EIO, before},
		{"put torn", "op=put fault=torn", true, put, io.ErrShortWrite, cut},
		{"put syncfail", "op=put fault=syncfail", true, put, syscall.EIO, whole},
		{"write group covers put", "op=write fault=enospc", true, put, syscall.ENOSPC, before},
		{"get eio", "op=get fault=eio", true, get, syscall.EIO, before},
		{"list eio", "op=list fault=eio", true, list, syscall.EIO, before},
		{"delete eio leaves the object", "op=delete fault=eio", true, del, syscall.EIO, before},
		{"delete syncfail deletes it", "op=delete fault=syncfail", true, del, syscall.EIO, absent},
		{"other names pass", "op=any path=other fault=eio", false, putIfAbsent, nil, whole},
		{"other ops pass", "op=get|list|delete fault=eio", false, putIfAbsent, nil, whole},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			inner := openLocal(t)
			if c.setup {
				if err := inner.Put(ctx, "obj", []byte("old")); err != nil {
					t.Fatal(err)
				}
			}
			in := mustInjector(t, c.spec)
			err := c.call(ctx, faultstore.Wrap(inner, in))
			switch {
			case c.wantErr == nil && err != nil:
				t.Fatalf("call: %v", err)
			case c.wantErr != nil && (!errors.Is(err, c.wantErr) || !errors.Is(err, faultstore.ErrInjected)):
				t.Fatalf("call: %v, want an injected %v", err, c.wantErr)
			case c.wantErr != nil && !strings.Contains(err.Error(), "obj"):
				t.Errorf("the error does not name the object: %v", err)
			}
			got, gerr := inner.Get(ctx, "obj")
			var ok bool
			switch c.after {
			case absent:
				ok = storage.IsNotExist(gerr)
			case whole:
				ok = gerr == nil && string(got) == payload
			case cut:
				ok = gerr == nil && len(got) < len(payload) && strings.HasPrefix(payload, string(got))
			case before:
				ok = gerr == nil && string(got) == "old"
			}
			if !ok {
				t.Errorf("inner store holds %q (%v) after the call", got, gerr)
			}
			if n, want := in.Injected(), c.wantErr != nil || strings.Contains(c.spec, "slow"); want != (n == 1) {
				t.Errorf("%d faults recorded", n)
			}
		})
	}
}

func putIfAbsent(ctx context.Context, s storage.Store) error {
	return s.PutIfAbsent(ctx, "obj", []byte(payload))
}
func put(ctx context.Context, s storage.Store) error { return s.Put(ctx, "obj", []byte(payload)) }
func get(ctx context.Context, s storage.Store) error {
	_, err := s.Get(ctx, "obj")
	return err
}
func list(ctx context.Context, s storage.Store) error {
	_, err := s.List(ctx, "obj")
	return err
}
func del(ctx context.Context, s storage.Store) error { return s.Delete(ctx, "obj") }

// TestNthAndTimes checks that a rule hits exactly the calls it names,
// counting only the calls it selects.
func TestNthAndTimes(t *testing.T) {
	cases := []struct {
		spec string
		want []int // the 1-based calls of put that fail, of 6
	}{
		{"op=put fault=eio", []int{1}},
		{"op=put nth=3 fault=eio", []int{3}},
		{"op=put nth=3 times=2 fault=eio", []int{3, 4}},
		{"op=put path=b/* nth=2 fault=eio", []int{4}}, // names alternate a/, b/
		{"op=get nth=1 fault=eio; op=put nth=5 fault=eio", []int{5}},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			s := faultstore.Wrap(openLocal(t), mustInjector(t, c.spec))
			var failed []int
			for i := 1; i <= 6; i++ {
				name := fmt.Sprintf("%s/%d", []string{"a", "b"}[(i+1)%2], i)
				if err := s.Put(context.Background(), name, []byte("x")); err != nil {
					failed = append(failed, i)
				}
			}
			if !slices.Equal(failed, c.want) {
				t.Errorf("calls %v failed, want %v", failed, c.want)
			}
		})
	}
}

// TestProbabilityIsDeterministic checks that a probabilistic rule picks
// the same calls for the same seed, whatever order the calls of different
// names come in, and other calls for another seed.
func TestProbabilityIsDeterministic(t *testing.T) {
	names := make([]string, 400)
	for i := range names {
		names[i] = fmt.Sprintf("state/op/%d/%d.delta", i%4, i)
	}
	hit := func(seed uint64, order []string) []string {
		in := mustInjector(t, fmt.Sprintf("seed=%d; op=put path=state/** p=0.3 fault=eio", seed))
		s := faultstore.Wrap(openLocal(t), in)
		for _, n := range order {
			_ = s.Put(context.Background(), n, []byte("x"))
		}
		var got []string
		for _, e := range in.Events() {
			got = append(got, e.Name)
		}
		slices.Sort(got)
		return got
	}
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	a, b, c := hit(1, names), hit(1, reversed), hit(2, names)
	if !slices.Equal(a, b) {
		t.Errorf("seed 1 hit %d calls in one order and %d in the other, or other names", len(a), len(b))
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 1 and 2 hit the same %d calls", len(a))
	}
	if len(a) < 80 || len(a) > 160 {
		t.Errorf("p=0.3 hit %d of %d calls", len(a), len(names))
	}
}

// TestTornLengthIsDeterministic checks that a torn write keeps the same
// number of bytes for the same seed.
func TestTornLengthIsDeterministic(t *testing.T) {
	held := func(seed int) string {
		inner := openLocal(t)
		s := faultstore.Wrap(inner, mustInjector(t, fmt.Sprintf("seed=%d; op=put fault=torn", seed)))
		_ = s.Put(context.Background(), "obj", bytes.Repeat([]byte("0123456789"), 100))
		b, err := inner.Get(context.Background(), "obj")
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if a, b := held(3), held(3); a != b {
		t.Errorf("seed 3 kept %d bytes, then %d", len(a), len(b))
	}
	lens := map[int]bool{}
	for seed := range 8 {
		lens[len(held(seed))] = true
	}
	if len(lens) < 4 {
		t.Errorf("8 seeds cut writes at only %d lengths", len(lens))
	}
}

// TestSlowWaitsAndHonoursContext checks the delay in a synctest bubble
// and that a cancelled context ends it without performing the call.
func TestSlowWaitsAndHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := openLocal(t)
		s := faultstore.Wrap(inner, mustInjector(t, "op=put-if-absent fault=slow delay=10s times=2"))
		start := time.Now()
		if err := s.PutIfAbsent(context.Background(), "a", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 10*time.Second {
			t.Errorf("slow put-if-absent took %s of bubble time, want 10s", d)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := s.PutIfAbsent(ctx, "b", []byte("x")); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("slow put-if-absent with a 1s deadline: %v", err)
		}
		if _, err := inner.Get(context.Background(), "b"); !storage.IsNotExist(err) {
			t.Errorf("the cancelled call was performed: %v", err)
		}
	})
}

// TestSetEnabledClearsTheFault checks that nothing is injected or counted
// while the injector is off.
func TestSetEnabledClearsTheFault(t *testing.T) {
	in := mustInjector(t, "op=put nth=2 fault=eio")
	s := faultstore.Wrap(openLocal(t), in)
	ctx := context.Background()
	in.SetEnabled(false)
	for i := range 3 {
		if err := s.Put(ctx, fmt.Sprint("off/", i), nil); err != nil {
			t.Fatalf("put with the injector off: %v", err)
		}
	}
	in.SetEnabled(true)
	if err := s.Put(ctx, "on/1", nil); err != nil {
		t.Fatalf("first selected put: %v", err)
	}
	if err := s.Put(ctx, "on/2", nil); err == nil {
		t.Fatal("second selected put did not fail")
	}
}

// TestOnInject checks that every fault is reported before it takes effect.
func TestOnInject(t *testing.T) {
	var seen []string
	cfg, err := faultstore.Parse("op=get fault=eio times=2")
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnInject = func(e faultstore.Event) { seen = append(seen, e.String()) }
	in, err := faultstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := faultstore.Wrap(openLocal(t), in)
	_, _ = s.Get(context.Background(), "x/1")
	_, _ = s.Get(context.Background(), "x/2")
	_, _ = s.Get(context.Background(), "x/3")
	want := []string{"faultstore: injected eio into get x/1 (rule 1)", "faultstore: injected eio into get x/2 (rule 1)"}
	if !slices.Equal(seen, want) {
		t.Errorf("OnInject saw %q, want %q", seen, want)
	}
}

// TestLocalDirThroughWrap checks that a wrapped local store (and a view of
// one) is still known as a local directory, so the engine's checkpoint
// lock survives the wrapping.
func TestLocalDirThroughWrap(t *testing.T) {
	l := openLocal(t)
	w := faultstore.Wrap(l, nil)
	if d, ok := storage.LocalDir(w); !ok || d != l.Root() {
		t.Errorf("LocalDir(Wrap(local)) = %q, %v; want %q", d, ok, l.Root())
	}
	if d, ok := storage.LocalDir(storage.Sub(w, "state/a")); !ok || d != filepath.Join(l.Root(), "state", "a") {
		t.Errorf("LocalDir(Sub(Wrap(local), state/a)) = %q, %v", d, ok)
	}
	if d, ok := storage.LocalDir(faultstore.Wrap(storage.Sub(l, "x"), nil)); !ok || d != filepath.Join(l.Root(), "x") {
		t.Errorf("LocalDir(Wrap(Sub(local, x))) = %q, %v", d, ok)
	}
}

// TestFSFaults checks the faults the local store meets at the file
// system: whatever call fails, the object is absent or whole (never cut),
// the caller gets the error, and no temporary file survives a reopen.
func TestFSFaults(t *testing.T) {
	cases := []struct {
		spec string
		op   func(ctx context.Context, s storage.Store) error
		// mayExist: the fault came after the object was in place (the
		// directory fsync after the link), so it may be there, whole.
		mayExist bool
	}{
		{"op=fs.create path=obj fault=enospc", putIfAbsent, false},
		{"op=fs.write path=obj fault=torn", putIfAbsent, false},
		{"op=fs.write path=obj fault=enospc", put, false},
		{"op=fs.sync path=obj fault=eio", putIfAbsent, false},
		{"op=fs.link path=obj fault=eio", putIfAbsent, false},
		{"op=fs.rename path=obj fault=eio", put, false},
		{"op=fs.syncdir path=. fault=eio", putIfAbsent, true},
		{"op=fs.write path=obj fault=torn", put, false},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			dir := t.TempDir()
			in := mustInjector(t, c.spec)
			in.SetEnabled(false) // opening syncs the root
			s, err := faultstore.OpenLocal(dir, in)
			if err != nil {
				t.Fatal(err)
			}
			in.SetEnabled(true)
			ctx := context.Background()
			err = c.op(ctx, s)
			if !errors.Is(err, faultstore.ErrInjected) {
				t.Fatalf("call: %v, want the injected fault", err)
			}
			got, gerr := s.Get(ctx, "obj")
			switch {
			case gerr == nil && string(got) != payload:
				t.Errorf("object holds %q after %s", got, c.spec)
			case gerr == nil && !c.mayExist:
				t.Errorf("object exists after %s failed the call", c.spec)
			case gerr != nil && !storage.IsNotExist(gerr):
				t.Errorf("get: %v", gerr)
			}
			if _, err := storage.OpenLocal(dir, storage.LocalOptions{}); err != nil {
				t.Fatal(err)
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".tmp") {
					t.Errorf("temporary file %s survived the reopen", e.Name())
				}
			}
		})
	}
}

// TestFSFaultSweep fails the Nth file-system call of a put-if-absent for N
// from 1 until a run injects nothing (pebble's fault-tolerance sweep),
// and after each checks that the object is absent or whole and that a
// retry without faults leaves it whole.
func TestFSFaultSweep(t *testing.T) {
	ctx := context.Background()
	for _, fault := range []string{"eio", "enospc"} {
		t.Run(fault, func(t *testing.T) {
			for n := 1; ; n++ {
				dir := t.TempDir()
				in := mustInjector(t, fmt.Sprintf("op=fs nth=%d fault=%s", n, fault))
				in.SetEnabled(false)
				s, err := faultstore.OpenLocal(dir, in)
				if err != nil {
					t.Fatal(err)
				}
				in.SetEnabled(true)
				err = s.PutIfAbsent(ctx, "commits/7", []byte(payload))
				if in.Injected() == 0 {
					if err != nil {
						t.Fatalf("call %d: no fault injected, yet %v", n, err)
					}
					if n < 5 {
						t.Fatalf("only %d file-system calls seen", n-1)
					}
					return
				}
				if err == nil {
					// Only a failure of the cleanup of the link's source
					// is not the caller's business; anything else is.
					if e := in.Events()[0]; e.Op != faultstore.OpFSRemove {
						t.Fatalf("call %d (%s) failed and the put-if-absent reported nothing", n, e)
					}
				}
				got, gerr := s.Get(ctx, "commits/7")
				if gerr == nil && string(got) != payload {
					t.Fatalf("call %d: object holds %q", n, got)
				}
				in.SetEnabled(false)
				if err := s.PutIfAbsent(ctx, "commits/7", []byte(payload)); err != nil && !storage.IsExist(err) {
					t.Fatalf("call %d: retry: %v", n, err)
				}
				if got, err := s.Get(ctx, "commits/7"); err != nil || string(got) != payload {
					t.Fatalf("call %d: after the retry the object holds %q (%v)", n, got, err)
				}
			}
		})
	}
}
