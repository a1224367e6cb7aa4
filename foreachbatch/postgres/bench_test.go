package postgres

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/internal/testenv"
)

const benchRows = 100_000

// benchBatch is batch id's rows: benchRows fresh keys in records of 10k.
func benchBatch(mem memory.Allocator, id int64) []arrow.RecordBatch {
	var recs []arrow.RecordBatch
	for start := int64(0); start < benchRows; start += 10_000 {
		b := array.NewRecordBuilder(mem, kvSchema)
		for i := start; i < start+10_000; i++ {
			b.Field(0).(*array.Int64Builder).Append(id*benchRows + i)
			b.Field(1).(*array.Int64Builder).Append(i % 1000)
		}
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	return recs
}

func release(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// BenchmarkWrite100k compares the sink's COPY path with a row-by-row INSERT
// baseline, both under the progress guard, 100k rows per batch.
//
//	scripts/pg-setup.sh; export ONCEFLOW_TEST_PG_URL=…
//	go test -run '^$' -bench Write100k -benchtime 3x ./foreachbatch/postgres/
func BenchmarkWrite100k(b *testing.B) {
	mem := memory.NewGoAllocator()
	b.Run("copy", func(b *testing.B) {
		pool := testenv.PG(b)
		ctx := context.Background()
		s, err := NewOffsetsInSink(pool, "bench", "totals", WithKeyColumns("k"), WithMerge(MergeAdd, "total"), WithCreateTables(true))
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(ctx, "q"); err != nil {
			b.Fatal(err)
		}
		if err := s.ValidateSchema(kvSchema); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			recs := benchBatch(mem, int64(i))
			b.StartTimer()
			if err := s.AddBatch(ctx, int64(i), kvSchema, recs); err != nil {
				b.Fatal(err)
			}
			release(recs)
		}
		b.ReportMetric(float64(benchRows*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("row-by-row", func(b *testing.B) {
		pool := testenv.PG(b)
		ctx := context.Background()
		g, err := NewGuard(pool, "bench", WithCreateTables(true))
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Start(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "CREATE TABLE totals (k bigint PRIMARY KEY, total bigint)"); err != nil {
			b.Fatal(err)
		}
		const upsert = "INSERT INTO totals AS dst (k, total) VALUES ($1, $2) " +
			"ON CONFLICT (k) DO UPDATE SET total = COALESCE(dst.total + EXCLUDED.total, dst.total, EXCLUDED.total)"
		b.ResetTimer()
		for i := range b.N {
			b.StopTimer()
			recs := benchBatch(mem, int64(i))
			b.StartTimer()
			_, err := g.Run(ctx, int64(i), func(ctx context.Context, tx pgx.Tx) error {
				for _, r := range recs {
					ks := r.Column(0).(*array.Int64)
					vs := r.Column(1).(*array.Int64)
					for j := range int(r.NumRows()) {
						if _, err := tx.Exec(ctx, upsert, ks.Value(j), vs.Value(j)); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			release(recs)
		}
		b.ReportMetric(float64(benchRows*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}
