package storage_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/onceflow/onceflow/storage"
)

// reviewGetRange reads a range, turning a panic into an error.
func reviewGetRange(ctx context.Context, s storage.Store, name string, off, n int64) (b []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return storage.GetRange(ctx, s, name, off, n)
}

// GetRange on Local: a length past the object's end reads up to the end
// (the RangeGetter contract), however large; missing objects, folders,
// a zero length of a missing object, and negative ranges fail.
func TestReviewBundleLocalGetRange(t *testing.T) {
	ctx := context.Background()
	s, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "d/obj", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		off, n int64
		want   string
	}{
		{"d/obj", 2, 3, "234"},
		{"d/obj", 9, 1 << 40, "9"},
		{"d/obj", 0, 1 << 62, "0123456789"},
		{"d/obj", 1 << 40, 4, ""},
		{"empty", 0, 1 << 30, ""},
	} {
		got, err := reviewGetRange(ctx, s, tc.name, tc.off, tc.n)
		if err != nil || string(got) != tc.want {
			t.Errorf("GetRange(%s, %d, %d) = %q, %v; want %q", tc.name, tc.off, tc.n, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name   string
		off, n int64
	}{{"missing", 0, 0}, {"missing", 0, 4}, {"d", 0, 4}, {"d/obj/x", 0, 1}} {
		if _, err := reviewGetRange(ctx, s, tc.name, tc.off, tc.n); !storage.IsNotExist(err) {
			t.Errorf("GetRange(%s, %d, %d): %v, want not-exist", tc.name, tc.off, tc.n, err)
		}
	}
	for _, r := range [][2]int64{{-1, 4}, {0, -1}} {
		if _, err := reviewGetRange(ctx, s, "d/obj", r[0], r[1]); err == nil || storage.IsNotExist(err) {
			t.Errorf("GetRange(%d, %d): %v, want a bad-range error", r[0], r[1], err)
		}
	}
	if _, err := reviewGetRange(ctx, s, "../escape", 0, 1); err == nil {
		t.Error("GetRange of a name outside the store succeeded")
	}
}
