package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	iceberggo "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// readRange reads (start, end] and returns column i in emit order.
func readRange(t *testing.T, src *Source, start, end json.RawMessage) []int64 {
	t.Helper()
	var out []int64
	err := src.Read(context.Background(), start, end, func(rec arrow.RecordBatch) error {
		a := rec.Column(0).(*array.Int64)
		for j := 0; j < a.Len(); j++ {
			out = append(out, a.Value(j))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSourceReadsAppendsBetweenSnapshots(t *testing.T) {
	ctx := context.Background()
	cat := sqliteCatalog(t)
	s := newTestSink(t, cat, "lake.src", "w", WithPartitionSpec(Bucket("i", 3)))
	addBatch(t, s, 0, 0, 10)
	addBatch(t, s, 1, 10, 20)
	src, err := NewSource(ctx, cat, "lake.src", WithMaxSnapshotsPerTrigger(1))
	if err != nil {
		t.Fatal(err)
	}
	if !arrow.TypeEqual(src.Schema().Field(3).Type, testSchema.Field(3).Type) {
		t.Fatalf("schema = %s", src.Schema())
	}
	o0, err := src.InitialOffset(ctx)
	if err != nil {
		t.Fatal(err)
	}
	o1, err := src.LatestOffset(ctx, o0)
	if err != nil {
		t.Fatal(err)
	}
	o2, err := src.LatestOffset(ctx, o1)
	if err != nil {
		t.Fatal(err)
	}
	if o3, _ := src.LatestOffset(ctx, o2); string(o3) != string(o2) {
		t.Fatalf("no new snapshot but LatestOffset moved: %s → %s", o2, o3)
	}
	first := readRange(t, src, o0, o1)
	if got := slices.Sorted(slices.Values(first)); !slices.Equal(got, seq(0, 10)) {
		t.Fatalf("batch 1 = %v", got)
	}
	if again := readRange(t, src, o0, o1); !slices.Equal(again, first) {
		t.Fatalf("a replay read other rows or order: %v vs %v", again, first)
	}
	if got := slices.Sorted(slices.Values(readRange(t, src, o1, o2))); !slices.Equal(got, seq(10, 20)) {
		t.Fatalf("batch 2 = %v", got)
	}

	// An overwrite stops the query unless skipped.
	tbl, _ := cat.LoadTable(ctx, "lake.src")
	tx := tbl.NewTransaction()
	if err := tx.Delete(ctx, iceberggo.EqualTo(iceberggo.Reference("i"), int64(3)), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	addBatch(t, s, 2, 20, 25)
	full, err := NewSource(ctx, cat, "lake.src")
	if err != nil {
		t.Fatal(err)
	}
	o4, err := full.LatestOffset(ctx, o2)
	if err != nil {
		t.Fatal(err)
	}
	err = full.Read(ctx, o2, o4, func(arrow.RecordBatch) error { return nil })
	if !errors.Is(err, ErrRewrittenSnapshot) {
		t.Fatalf("read over a delete snapshot: %v", err)
	}
	skip, _ := NewSource(ctx, cat, "lake.src", WithSkipOverwrites())
	if got := readRange(t, skip, o2, o4); !slices.Equal(slices.Sorted(slices.Values(got)), seq(20, 25)) {
		t.Fatalf("skipping overwrites read %v", got)
	}
}

func TestSourceExpiredSnapshotIsDataLoss(t *testing.T) {
	ctx := context.Background()
	cat := sqliteCatalog(t)
	s := newTestSink(t, cat, "lake.src", "w")
	for b := int64(0); b < 4; b++ {
		addBatch(t, s, b, b*5, b*5+5)
	}
	src, _ := NewSource(ctx, cat, "lake.src", WithMaxSnapshotsPerTrigger(1))
	o0, _ := src.InitialOffset(ctx)
	o1, _ := src.LatestOffset(ctx, o0)
	tbl, _ := cat.LoadTable(ctx, "lake.src")
	tx := tbl.NewTransaction()
	if err := tx.ExpireSnapshots(table.WithRetainLast(1), table.WithOlderThan(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := src.LatestOffset(ctx, o1)
	var dl *DataLossError
	if !errors.As(err, &dl) || !errors.Is(err, ErrDataLoss) {
		t.Fatalf("LatestOffset after expiry: %v", err)
	}
}
