package checkpoint

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

func TestReaderReadsWhatTheLayoutNames(t *testing.T) {
	ctx := context.Background()
	store, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	r := NewReader(store)
	if _, err := r.Metadata(ctx); !storage.IsNotExist(err) {
		t.Fatalf("Metadata of an empty store: %v, want not-exist", err)
	}
	if _, _, ok, err := r.LatestCommit(ctx); ok || err != nil {
		t.Fatalf("LatestCommit of an empty store: ok=%v err=%v", ok, err)
	}

	meta, _ := EncodeMetadata(Metadata{Version: FormatVersion, ID: "q", Name: "n", Created: "2026-01-01T00:00:00Z"})
	put := func(name string, v any) {
		t.Helper()
		b := meta
		if v != nil {
			if b, err = offsetlog.Encode(v); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.Put(ctx, name, b); err != nil {
			t.Fatal(err)
		}
	}
	put(MetadataFile, nil)
	for id := int64(0); id < 3; id++ {
		put(OffsetsFile(id), OffsetsEntry{BatchID: id})
		put(ProgressFile(id), map[string]int64{"batchId": id})
	}
	put(CommitFile(0), CommitEntry{BatchID: 0})
	put(CommitFile(1), CommitEntry{BatchID: 1})
	if err := store.Put(ctx, StateDir("agg", 2)+"/schema", []byte("s")); err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, SourceDir(1)+"/log", []byte("l")); err != nil {
		t.Fatal(err)
	}

	if m, err := r.Metadata(ctx); err != nil || m.ID != "q" {
		t.Fatalf("Metadata: %+v %v", m, err)
	}
	if _, ok, err := r.ForkedFrom(ctx); ok || err != nil {
		t.Fatalf("ForkedFrom of a checkpoint that is no fork: ok=%v err=%v", ok, err)
	}
	if ids, err := r.OffsetIDs(ctx); err != nil || !slices.Equal(ids, []int64{0, 1, 2}) {
		t.Fatalf("OffsetIDs: %v %v", ids, err)
	}
	if id, e, ok, err := r.LatestOffsets(ctx); err != nil || !ok || id != 2 || e.BatchID != 2 {
		t.Fatalf("LatestOffsets: %d %+v %v %v", id, e, ok, err)
	}
	if ids, err := r.CommitIDs(ctx); err != nil || !slices.Equal(ids, []int64{0, 1}) {
		t.Fatalf("CommitIDs: %v %v", ids, err)
	}
	if id, _, ok, err := r.LatestCommit(ctx); err != nil || !ok || id != 1 {
		t.Fatalf("LatestCommit: %d %v %v", id, ok, err)
	}
	var p struct{ BatchID int64 }
	if id, ok, err := r.LatestProgress(ctx, &p); err != nil || !ok || id != 2 || p.BatchID != 2 {
		t.Fatalf("LatestProgress: %d %+v %v %v", id, p, ok, err)
	}
	// A progress record torn by a crash (written without fsync) is passed
	// over for the one before it; reading it alone names the damage.
	if err := store.Put(ctx, ProgressFile(3), []byte("v1\n{\"batchId\":")); err != nil {
		t.Fatal(err)
	}
	if id, ok, err := r.LatestProgress(ctx, &p); err != nil || !ok || id != 2 || p.BatchID != 2 {
		t.Fatalf("LatestProgress past a torn record: %d %+v %v %v", id, p, ok, err)
	}
	if err := r.Progress(ctx, 3, &p); !errors.Is(err, offsetlog.ErrCorrupt) {
		t.Fatalf("Progress of a torn record: %v, want ErrCorrupt", err)
	}
	if err := r.Progress(ctx, 7, &p); !errors.Is(err, offsetlog.ErrNotFound) {
		t.Fatalf("Progress of a missing batch: %v, want ErrNotFound", err)
	}
	if _, err := r.Commit(ctx, 2); !errors.Is(err, offsetlog.ErrNotFound) {
		t.Fatalf("Commit of an uncommitted batch: %v, want ErrNotFound", err)
	}
	if b, err := r.State("agg", 2).Get(ctx, "schema"); err != nil || string(b) != "s" {
		t.Fatalf("State view: %q %v", b, err)
	}
	if b, err := r.Source(1).Get(ctx, "log"); err != nil || string(b) != "l" {
		t.Fatalf("Source view: %q %v", b, err)
	}
}

func TestLayoutNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{OffsetsFile(42), "offsets/00000000000000000042"},
		{CommitFile(7), "commits/00000000000000000007"},
		{ProgressFile(0), "progress/00000000000000000000"},
		{StateDir("agg-0", 3), "state/agg-0/3"},
		{SourceDir(1), "sources/1"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
