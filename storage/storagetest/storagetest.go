// Package storagetest is the conformance suite every storage backend passes:
// the guarantees package storage documents, checked through the Store
// interface alone, so the local and S3 backends are held to the same
// contract.
//
// Call Run from a backend's test with a function that opens a fresh, empty
// store for each subtest. Run closes each store it opens when the subtest
// ends. The suite needs nothing but the store; it runs its subtests one after
// another and bounds every loop in count, so it suits a real service on
// loopback.
package storagetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/storage"
)

// Run checks that the stores open returns keep the storage.Store contract.
// open must return a fresh store with no objects in it.
func Run(t *testing.T, open func(t *testing.T) storage.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s storage.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"GetMissing", testGetMissing},
		{"PutIfAbsent", testPutIfAbsent},
		{"PutIfAbsentRace", testPutIfAbsentRace},
		{"PutOverwrite", testPutOverwrite},
		{"PutOverwriteAtomic", testPutOverwriteAtomic},
		{"List", testList},
		{"ListBadPrefix", testListBadPrefix},
		{"Delete", testDelete},
		{"DeleteMany", testDeleteMany},
		{"BadNames", testBadNames},
		{"Sub", testSub},
		{"LargeObject", testLargeObject},
		{"CanceledContext", testCanceledContext},
		{"URL", testURL},
		{"GetRange", testGetRange},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustPut(t *testing.T, s storage.Store, name string, data []byte) {
	t.Helper()
	if err := s.Put(ctxFor(t), name, data); err != nil {
		t.Fatalf("put %s: %v", name, err)
	}
}

func mustGet(t *testing.T, s storage.Store, name string, want []byte) {
	t.Helper()
	got, err := s.Get(ctxFor(t), name)
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("get %s: got %d bytes %q, want %d bytes %q", name, len(got), trunc(got), len(want), trunc(want))
	}
}

func mustNotExist(t *testing.T, s storage.Store, name string) {
	t.Helper()
	b, err := s.Get(ctxFor(t), name)
	if !errors.Is(err, storage.ErrNotExist) {
		t.Fatalf("get %s: got (%d bytes, %v), want an error wrapping storage.ErrNotExist", name, len(b), err)
	}
}

func names(t *testing.T, s storage.Store, prefix string) []string {
	t.Helper()
	infos, err := s.List(ctxFor(t), prefix)
	if err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	out := make([]string, len(infos))
	for i, in := range infos {
		out[i] = in.Name
	}
	return out
}

func trunc(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}

func testRoundTrip(t *testing.T, s storage.Store) {
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", []byte{}},
		{"one", []byte("1")},
		{"nested/deeper/object.json", []byte(`{"v":1}`)},
		{"binary", []byte{0, 1, 2, 0xff, '\n', '\r', 0}},
		{"dots.in.name..x", []byte("dots")},
		{"spaces and ünïcode/ok", []byte("unicode")},
	}
	for _, c := range cases {
		mustPut(t, s, c.name, c.data)
	}
	for _, c := range cases {
		mustGet(t, s, c.name, c.data)
	}
}

func testGetMissing(t *testing.T, s storage.Store) {
	mustNotExist(t, s, "missing")
	mustNotExist(t, s, "missing/deeper")
	mustPut(t, s, "folder/object", []byte("x"))
	// A folder is not an object, and neither is a path through an object.
	mustNotExist(t, s, "folder")
	mustNotExist(t, s, "folder/object/below")
	mustNotExist(t, s, "folder/obj")
}

func testPutIfAbsent(t *testing.T, s storage.Store) {
	ctx := ctxFor(t)
	if err := s.PutIfAbsent(ctx, "commits/1", []byte("first")); err != nil {
		t.Fatalf("first put-if-absent: %v", err)
	}
	err := s.PutIfAbsent(ctx, "commits/1", []byte("second"))
	if !errors.Is(err, storage.ErrExist) {
		t.Fatalf("second put-if-absent: got %v, want an error wrapping storage.ErrExist", err)
	}
	if !storage.IsExist(err) {
		t.Fatalf("storage.IsExist(%v) = false", err)
	}
	mustGet(t, s, "commits/1", []byte("first"))

	// An object written by Put counts as present too.
	mustPut(t, s, "commits/2", []byte("put"))
	if err := s.PutIfAbsent(ctx, "commits/2", []byte("x")); !errors.Is(err, storage.ErrExist) {
		t.Fatalf("put-if-absent over a Put object: got %v, want ErrExist", err)
	}
	mustGet(t, s, "commits/2", []byte("put"))

	// After a delete the name is free again.
	if err := s.Delete(ctx, "commits/1"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "commits/1", []byte("again")); err != nil {
		t.Fatalf("put-if-absent after delete: %v", err)
	}
	mustGet(t, s, "commits/1", []byte("again"))
}

func testPutIfAbsentRace(t *testing.T, s storage.Store) {
	const writers = 32
	const rounds = 3
	ctx := ctxFor(t)
	for r := range rounds {
		name := fmt.Sprintf("offsets/%020d", r)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			errs    = make([]error, writers)
			payload = func(i int) []byte {
				return bytes.Repeat([]byte(fmt.Sprintf("writer %02d of round %d;", i, r)), 100+i)
			}
		)
		for i := range writers {
			wg.Go(func() {
				<-start
				errs[i] = s.PutIfAbsent(ctx, name, payload(i))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: writers %d and %d both won the put-if-absent race", r, winner, i)
				}
				winner = i
			case errors.Is(err, storage.ErrExist):
			default:
				t.Fatalf("round %d: writer %d: %v", r, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won the put-if-absent race", r)
		}
		mustGet(t, s, name, payload(winner))
	}
}

func testPutOverwrite(t *testing.T, s storage.Store) {
	mustPut(t, s, "state/1.snapshot", []byte("old, and longer than the new one"))
	mustPut(t, s, "state/1.snapshot", []byte("new"))
	mustGet(t, s, "state/1.snapshot", []byte("new"))
	mustPut(t, s, "state/1.snapshot", []byte{})
	mustGet(t, s, "state/1.snapshot", []byte{})
	if got := names(t, s, ""); !slices.Equal(got, []string{"state/1.snapshot"}) {
		t.Fatalf("list after overwrites: %q, want just the object (no temporaries)", got)
	}
}

// testPutOverwriteAtomic overwrites one object with uniform payloads of
// different bytes and lengths while readers check every read is one of them.
func testPutOverwriteAtomic(t *testing.T, s storage.Store) {
	const (
		name    = "hot/object"
		writes  = 24
		readers = 4
	)
	ctx := ctxFor(t)
	const base, step = 64 << 10, 4099
	payload := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, base+i*step) }
	// whole reports whether b is payload(i) for some i.
	whole := func(b []byte) bool {
		n := len(b) - base
		return n >= 0 && n%step == 0 && n/step < writes && bytes.Equal(b, payload(n/step))
	}
	mustPut(t, s, name, payload(0))
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	reads := 0
	for range readers {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				b, err := s.Get(ctx, name)
				mu.Lock()
				reads++
				switch {
				case err != nil:
					bad = append(bad, err.Error())
				case !whole(b):
					if len(bad) < 5 {
						bad = append(bad, fmt.Sprintf("read %d bytes starting %q, not one whole payload", len(b), trunc(b)))
					}
				}
				mu.Unlock()
			}
		})
	}
	for i := 1; i < writes; i++ {
		if err := s.Put(ctx, name, payload(i)); err != nil {
			close(done)
			wg.Wait()
			t.Fatalf("put %d: %v", i, err)
		}
	}
	close(done)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d reads, bad ones: %q", reads, bad)
	}
	mustGet(t, s, name, payload(writes-1))
}

func testList(t *testing.T, s storage.Store) {
	all := []string{
		"a/b/c",
		"a/b/d",
		"a/bc",
		"a/x",
		"ab",
		"commits/00000000000000000001",
		"offsets/00000000000000000001",
		"offsets/00000000000000000002",
		"offsets/00000000000000000010",
		"offsets/00010000000000000000",
		"offsets/metadata",
		"z",
	}
	// Write in a scrambled order; the listing must still be sorted.
	order := slices.Clone(all)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for _, n := range order {
		mustPut(t, s, n, []byte(n))
	}
	cases := []struct {
		prefix string
		want   []string
	}{
		{"", all},
		{"a", []string{"a/b/c", "a/b/d", "a/bc", "a/x", "ab"}},
		{"a/", []string{"a/b/c", "a/b/d", "a/bc", "a/x"}},
		{"a/b", []string{"a/b/c", "a/b/d", "a/bc"}},
		{"a/b/", []string{"a/b/c", "a/b/d"}},
		{"a/b/c", []string{"a/b/c"}},
		{"offsets/", []string{
			"offsets/00000000000000000001", "offsets/00000000000000000002",
			"offsets/00000000000000000010", "offsets/00010000000000000000", "offsets/metadata",
		}},
		{"offsets/000", []string{
			"offsets/00000000000000000001", "offsets/00000000000000000002",
			"offsets/00000000000000000010", "offsets/00010000000000000000",
		}},
		{"offsets/0000000000000000000", []string{"offsets/00000000000000000001", "offsets/00000000000000000002"}},
		{"offsets/m", []string{"offsets/metadata"}},
		{"offsets/metadata/", nil},
		{"nothing", nil},
		{"nothing/", nil},
		{"nothing/deeper/", nil},
		{"z/", nil},
	}
	for _, c := range cases {
		got := names(t, s, c.prefix)
		if !slices.Equal(got, c.want) {
			t.Errorf("list %q:\n got %q\nwant %q", c.prefix, got, c.want)
		}
	}
	infos, err := s.List(ctxFor(t), "a/b/")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		if in.Size != int64(len(in.Name)) {
			t.Errorf("list: %s has size %d, want %d", in.Name, in.Size, len(in.Name))
		}
		if in.ModTime < 0 {
			t.Errorf("list: %s has a negative modification time %d", in.Name, in.ModTime)
		}
	}
}

func testListBadPrefix(t *testing.T, s storage.Store) {
	mustPut(t, s, "a/b", []byte("x"))
	for _, p := range []string{"/", "/a", "../", "a/../", "./a", "a//", "a//b", "a\\b"} {
		infos, err := s.List(ctxFor(t), p)
		if !errors.Is(err, storage.ErrBadName) {
			t.Errorf("list %q: got (%d objects, %v), want an error wrapping storage.ErrBadName", p, len(infos), err)
		}
	}
}

func testDelete(t *testing.T, s storage.Store) {
	ctx := ctxFor(t)
	for _, n := range []string{"d/1", "d/2", "d/3", "keep"} {
		mustPut(t, s, n, []byte(n))
	}
	if err := s.Delete(ctx); err != nil {
		t.Fatalf("delete nothing: %v", err)
	}
	if err := s.Delete(ctx, "d/1", "d/missing", "d/3", "never/existed"); err != nil {
		t.Fatalf("delete with missing names: %v", err)
	}
	if got, want := names(t, s, ""), []string{"d/2", "keep"}; !slices.Equal(got, want) {
		t.Fatalf("after delete: %q, want %q", got, want)
	}
	mustNotExist(t, s, "d/1")
	if err := s.Delete(ctx, "d/2", "d/2"); err != nil {
		t.Fatalf("delete a name twice in one call: %v", err)
	}
	if err := s.Delete(ctx, "d/2"); err != nil {
		t.Fatalf("delete again: %v", err)
	}
	if got, want := names(t, s, ""), []string{"keep"}; !slices.Equal(got, want) {
		t.Fatalf("after deletes: %q, want %q", got, want)
	}
	if err := s.Delete(ctx, "keep", "../escape"); !errors.Is(err, storage.ErrBadName) {
		t.Fatalf("delete with a bad name: got %v, want ErrBadName", err)
	}
}

// testDeleteMany deletes more names than one S3 DeleteObjects request takes.
func testDeleteMany(t *testing.T, s storage.Store) {
	const n = 1003
	ctx := ctxFor(t)
	all := make([]string, n)
	for i := range all {
		all[i] = fmt.Sprintf("many/%05d", i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for _, name := range all {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := s.Put(ctx, name, nil); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := names(t, s, "many/"); len(got) != n {
		t.Fatalf("listed %d objects, want %d", len(got), n)
	}
	if err := s.Delete(ctx, append(all, "many/missing")...); err != nil {
		t.Fatalf("delete %d names: %v", n+1, err)
	}
	if got := names(t, s, ""); len(got) != 0 {
		t.Fatalf("after deleting all: %d objects left, first %q", len(got), got[0])
	}
}

func testBadNames(t *testing.T, s storage.Store) {
	ctx := ctxFor(t)
	bad := []string{
		"", "/", "/a", "a/", "a//b", ".", "..", "./a", "a/.", "a/../b", "../a",
		"x.tmp", "a/b.tmp", "a\\b", "a\x00b",
	}
	for _, n := range bad {
		if err := s.PutIfAbsent(ctx, n, []byte("x")); !errors.Is(err, storage.ErrBadName) {
			t.Errorf("put-if-absent %q: got %v, want ErrBadName", n, err)
		}
		if err := s.Put(ctx, n, []byte("x")); !errors.Is(err, storage.ErrBadName) {
			t.Errorf("put %q: got %v, want ErrBadName", n, err)
		}
		if _, err := s.Get(ctx, n); !errors.Is(err, storage.ErrBadName) {
			t.Errorf("get %q: got %v, want ErrBadName", n, err)
		}
		if err := s.Delete(ctx, n); !errors.Is(err, storage.ErrBadName) {
			t.Errorf("delete %q: got %v, want ErrBadName", n, err)
		}
	}
	if got := names(t, s, ""); len(got) != 0 {
		t.Fatalf("bad names left objects behind: %q", got)
	}
}

func testSub(t *testing.T, s storage.Store) {
	ctx := ctxFor(t)
	mustPut(t, s, "q/state/agg/0/1.delta", []byte("base"))
	mustPut(t, s, "q/stateful", []byte("outside"))
	v := storage.Sub(s, "q/state")
	mustGet(t, v, "agg/0/1.delta", []byte("base"))
	mustPut(t, v, "agg/1/1.delta", []byte("via view"))
	mustGet(t, s, "q/state/agg/1/1.delta", []byte("via view"))
	if err := v.PutIfAbsent(ctx, "agg/1/1.delta", []byte("again")); !errors.Is(err, storage.ErrExist) {
		t.Fatalf("put-if-absent through a view: got %v, want ErrExist", err)
	}
	mustNotExist(t, v, "stateful")
	if got, want := names(t, v, ""), []string{"agg/0/1.delta", "agg/1/1.delta"}; !slices.Equal(got, want) {
		t.Fatalf("list through the view: %q, want %q", got, want)
	}
	if got, want := names(t, v, "agg/1"), []string{"agg/1/1.delta"}; !slices.Equal(got, want) {
		t.Fatalf("list agg/1 through the view: %q, want %q", got, want)
	}

	// A view of a view, and the slashes around a prefix do not matter.
	vv := storage.Sub(v, "/agg/0/")
	mustGet(t, vv, "1.delta", []byte("base"))
	if got, want := names(t, vv, ""), []string{"1.delta"}; !slices.Equal(got, want) {
		t.Fatalf("list through the nested view: %q, want %q", got, want)
	}
	if !strings.HasSuffix(vv.URL(), "/q/state/agg/0") {
		t.Errorf("nested view URL %q does not end in /q/state/agg/0", vv.URL())
	}
	if err := vv.Delete(ctx, "1.delta", "missing"); err != nil {
		t.Fatal(err)
	}
	mustNotExist(t, s, "q/state/agg/0/1.delta")

	// A view cannot reach outside its folder.
	for _, n := range []string{"../stateful", "..", "/x"} {
		if _, err := v.Get(ctx, n); !errors.Is(err, storage.ErrBadName) {
			t.Errorf("get %q through the view: got %v, want ErrBadName", n, err)
		}
	}
	if _, err := v.List(ctx, "../"); !errors.Is(err, storage.ErrBadName) {
		t.Errorf("list ../ through the view: got %v, want ErrBadName", err)
	}
	// Closing a view leaves the store usable.
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, "q/stateful", []byte("outside"))
	if storage.Sub(s, "") != s || storage.Sub(s, "/") != s {
		t.Errorf("Sub with an empty prefix should return the store itself")
	}
}

func testLargeObject(t *testing.T, s storage.Store) {
	const size = 20 << 20
	data := make([]byte, size)
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < len(data); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < len(data); j++ {
			data[i+j] = byte(v >> (8 * j))
		}
	}
	want := sha256.Sum256(data)
	ctx := ctxFor(t)
	if err := s.PutIfAbsent(ctx, "big/put-if-absent", data); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "big/put", data); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"big/put-if-absent", "big/put"} {
		got, err := s.Get(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != size || sha256.Sum256(got) != want {
			t.Fatalf("%s: read back %d bytes that differ from the %d written", n, len(got), size)
		}
	}
	if err := s.PutIfAbsent(ctx, "big/put-if-absent", data[:10]); !errors.Is(err, storage.ErrExist) {
		t.Fatalf("second put-if-absent of a large object: got %v, want ErrExist", err)
	}
	infos, err := s.List(ctx, "big/")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 || infos[0].Size != size || infos[1].Size != size {
		t.Fatalf("list big/: %+v, want two objects of %d bytes", infos, size)
	}
}

func testCanceledContext(t *testing.T, s storage.Store) {
	mustPut(t, s, "c", []byte("x"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	checks := map[string]error{}
	checks["put-if-absent"] = s.PutIfAbsent(ctx, "c2", []byte("x"))
	checks["put"] = s.Put(ctx, "c2", []byte("x"))
	_, checks["get"] = s.Get(ctx, "c")
	_, checks["list"] = s.List(ctx, "")
	checks["delete"] = s.Delete(ctx, "c")
	for _, op := range []string{"put-if-absent", "put", "get", "list", "delete"} {
		if err := checks[op]; !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context: got %v, want an error wrapping context.Canceled", op, err)
		}
	}
	mustNotExist(t, s, "c2")
	mustGet(t, s, "c", []byte("x"))
}

func testURL(t *testing.T, s storage.Store) {
	u := s.URL()
	if u == "" || !strings.Contains(u, "://") {
		t.Fatalf("URL() = %q, want a URL", u)
	}
	if strings.Contains(u, "@") {
		t.Fatalf("URL() = %q carries user information", u)
	}
}

// testGetRange: storage.GetRange (the store's own RangeGetter when it has
// one) reads the asked bytes, fewer at the object's end, none past it,
// through a Sub view too, and a missing object is ErrNotExist.
func testGetRange(t *testing.T, s storage.Store) {
	ctx := ctxFor(t)
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	mustPut(t, s, "r/obj", data)
	for _, st := range []struct {
		s    storage.Store
		name string
	}{{s, "r/obj"}, {storage.Sub(s, "r"), "obj"}} {
		for _, c := range []struct{ off, n int64 }{{0, 1}, {0, 10000}, {1, 4096}, {9990, 100}, {9999, 1}, {10000, 5}, {20000, 5}, {5, 0}} {
			got, err := storage.GetRange(ctx, st.s, st.name, c.off, c.n)
			if err != nil {
				t.Fatalf("GetRange(%s, %d, %d): %v", st.name, c.off, c.n, err)
			}
			lo, hi := min(c.off, 10000), min(c.off+c.n, 10000)
			if !bytes.Equal(got, data[lo:hi]) {
				t.Errorf("GetRange(%s, %d, %d): %d bytes, want %d (bytes %d..%d)", st.name, c.off, c.n, len(got), hi-lo, lo, hi)
			}
		}
	}
	if _, err := storage.GetRange(ctx, s, "r/missing", 0, 10); !storage.IsNotExist(err) {
		t.Errorf("GetRange of a missing object: %v, want ErrNotExist", err)
	}
	if _, err := storage.GetRange(ctx, s, "r/obj", -1, 10); err == nil {
		t.Errorf("GetRange from byte -1: no error")
	}
}
