package statestore_test

import (
	"context"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// The engine's side of one stateful partition: load the last committed
// version, commit each batch's changes, maintain and purge after the batch
// commits.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "statestore-example")
	defer os.RemoveAll(dir)
	checkpoint, _ := storage.OpenLocal(dir, storage.LocalOptions{})

	key := arrow.NewSchema([]arrow.Field{{Name: "word", Type: arrow.BinaryTypes.String}}, nil)
	value := arrow.NewSchema([]arrow.Field{{Name: "count", Type: arrow.PrimitiveTypes.Int64}}, nil)
	st, err := statestore.Open(ctx, storage.Sub(checkpoint, "state/count/0"), statestore.Options{KeySchema: key, ValueSchema: value, SnapshotEvery: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	rows := func(schema *arrow.Schema, words []string, counts []int64) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		b.Field(0).(*array.StringBuilder).AppendValues(words, nil)
		if counts != nil {
			b.Field(1).(*array.Int64Builder).AppendValues(counts, nil)
		}
		return b.NewRecordBatch()
	}
	batches := []struct {
		words   []string
		counts  []int64
		deleted []string
	}{
		{words: []string{"to", "be"}, counts: []int64{1, 1}},
		{words: []string{"or", "to"}, counts: []int64{1, 2}},
		{words: []string{"not"}, counts: []int64{1}, deleted: []string{"or"}},
	}
	for n, b := range batches {
		ups := rows(st.Schema(), b.words, b.counts)
		dels := rows(key, b.deleted, nil)
		err := st.Commit(ctx, int64(n), ups, dels)
		ups.Release()
		dels.Release()
		if err != nil {
			fmt.Println(err)
			return
		}
		// ... the sink takes batch n, commits/n is written, then:
		if err := st.Maintain(ctx, int64(n)); err != nil {
			fmt.Println(err)
		}
		if err := st.Purge(ctx, int64(n)); err != nil {
			fmt.Println(err)
		}
	}

	recs, err := st.Load(ctx, 2) // after a restart: the state after batch 2
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range recs {
		for i := 0; i < int(r.NumRows()); i++ {
			fmt.Println(r.Column(0).ValueStr(i), r.Column(1).ValueStr(i))
		}
		r.Release()
	}
	deltas, snapshots, _ := st.Versions(ctx)
	fmt.Println("deltas", deltas, "snapshots", snapshots)
	// Output:
	// be 1
	// not 1
	// to 2
	// deltas [0 1 2] snapshots [1]
}
