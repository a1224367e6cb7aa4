package s3store_test

import (
	"context"
	"testing"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/storage"
)

// GetRange on S3 answers as Local's does: up to the object's end, nothing
// from its end on, not-exist for a missing object whatever the length.
func TestReviewBundleS3GetRange(t *testing.T) {
	ctx := context.Background()
	s := testenv.S3(t)
	if err := s.Put(ctx, "d/obj", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	sub := storage.Sub(s, "d")
	for _, tc := range []struct {
		st     storage.Store
		name   string
		off, n int64
		want   string
	}{
		{s, "d/obj", 2, 3, "234"},
		{sub, "obj", 8, 10, "89"},
		{s, "d/obj", 0, 1 << 40, "0123456789"},
		{s, "d/obj", 10, 3, ""},
		{s, "d/obj", 50, 3, ""},
		{s, "d/obj", 3, 0, ""},
		{s, "empty", 0, 4, ""},
	} {
		got, err := storage.GetRange(ctx, tc.st, tc.name, tc.off, tc.n)
		if err != nil || string(got) != tc.want {
			t.Errorf("GetRange(%s, %d, %d) = %q, %v; want %q", tc.name, tc.off, tc.n, got, err, tc.want)
		}
	}
	for _, n := range []int64{0, 4} {
		if _, err := storage.GetRange(ctx, s, "missing", 0, n); !storage.IsNotExist(err) {
			t.Errorf("GetRange(missing, 0, %d): %v, want not-exist", n, err)
		}
	}
	if _, err := storage.GetRange(ctx, s, "d/obj", -1, 2); err == nil {
		t.Error("negative offset accepted")
	}
}
