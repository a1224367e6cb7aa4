package filesink

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// Regression: a new query (a new checkpoint) on a table another query had
// written started again at batch 0 and got its first batches acknowledged
// without a row written, so the engine committed payments that were lost;
// now the other query is refused (Start returns an error, ErrOtherQuery, or
// AddBatch does) and a batch it gets acknowledged has its rows in the table.
//
// Before the fix: the sink ignores the query id it gets in Start, and AddBatch(N)
// returns nil for every N at or below the table's version. A query with a
// new checkpoint (deleted or lost checkpoint, a second query pointed at the
// same table by mistake) starts again at batch 0, so its first batches are
// acknowledged without a single row written: the engine then commits them,
// and those payments are lost for good. The sink should bind the table to
// the query id (record it in each entry) and refuse a batch id at or below
// the version from another query, instead of reporting it as done.
func TestNewQueryOnWrittenTableLosesNoRows(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	table, _ := openTable(t)
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)

	a, err := New(table)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx, "query-A"); err != nil {
		t.Fatal(err)
	}
	addBatch(t, ctx, a, mem, schema, 0, 0, 10, 10)
	addBatch(t, ctx, a, mem, schema, 1, 10, 20, 10)

	b, err := New(table)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx, "query-B"); err != nil {
		return // refusing another query's table at start is a fix
	}
	rec := makeRecord(t, mem, schema, 100, 110)
	defer rec.Release()
	if err := b.AddBatch(ctx, 0, schema, []arrow.RecordBatch{rec}); err != nil {
		return // refusing the batch is a fix
	}
	rows, _ := readAll(t, table)
	for id := int64(100); id < 110; id++ {
		if _, ok := rows[id]; !ok {
			t.Fatalf("query-B's batch 0 was acknowledged (AddBatch returned nil) but row %d is not in the table: %d rows, all from query-A", id, len(rows))
		}
	}
}
