package storage_test

import (
	"context"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/storage"
)

// TestPutVolatile pins what PutVolatile promises and what it does not: the
// object is whole for readers (directly, through Sub, and through the
// fallback to Put of a store without the capability), it costs no fsync of
// the file or its directory, and a crash may lose it, where Put's object
// survives.
func TestPutVolatile(t *testing.T) {
	ctx := context.Background()
	ff := &faultFS{FS: newMemFS()}
	s, err := storage.OpenLocal("/ckpt", storage.LocalOptions{FS: ff})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "progress/a", []byte("durable")); err != nil {
		t.Fatal(err)
	}
	before := len(ff.ops)
	sub := storage.Sub(s, "progress")
	for _, v := range []string{"one", "two"} {
		if err := storage.PutVolatile(ctx, sub, "b", []byte(v)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, "progress/b"); err != nil || string(got) != v {
			t.Fatalf("after PutVolatile %q: %q %v", v, got, err)
		}
	}
	for _, op := range ff.ops[before:] {
		if strings.HasPrefix(op, "sync") {
			t.Fatalf("PutVolatile synced: %v", ff.ops[before:])
		}
	}
	// A store without the capability gets a durable Put.
	plain := struct{ storage.Store }{s}
	if err := storage.PutVolatile(ctx, plain, "progress/c", []byte("put")); err != nil {
		t.Fatal(err)
	}
	ff.FS.(*memFS).Crash()
	s2, err := storage.OpenLocal("/ckpt", storage.LocalOptions{FS: ff.FS})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"progress/a": "durable", "progress/c": "put"} {
		if got, err := s2.Get(ctx, name); err != nil || string(got) != want {
			t.Errorf("%s after a crash: %q %v, want %q", name, got, err, want)
		}
	}
	if got, err := s2.Get(ctx, "progress/b"); err == nil && string(got) != "two" && len(got) != 0 {
		t.Errorf("progress/b after a crash: %q, want gone, empty or whole", got)
	}
}
