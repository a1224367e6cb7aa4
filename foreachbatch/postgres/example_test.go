package postgres_test

import (
	"context"
	"log"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onceflow/onceflow/foreachbatch"
	"github.com/onceflow/onceflow/foreachbatch/postgres"
)

// A foreachBatch function that writes two tables and an audit row in one
// transaction, exactly once per batch id: Guard.Run moves the job's progress
// row in the same transaction and skips a batch already applied.
func ExampleGuard_Run() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1/ledger")
	if err != nil {
		log.Fatal(err)
	}
	guard, err := postgres.NewGuard(pool, "payments-to-ledger", postgres.WithCreateTables(true))
	if err != nil {
		log.Fatal(err)
	}
	balances, err := postgres.NewOffsetsInSink(pool, "unused", "balances",
		postgres.WithKeyColumns("account"), postgres.WithMerge(postgres.MergeAdd, "amount"))
	if err != nil {
		log.Fatal(err)
	}
	sink := foreachbatch.New(func(ctx context.Context, batchID int64, schema *arrow.Schema, recs []arrow.RecordBatch) error {
		_, err := guard.Run(ctx, batchID, func(ctx context.Context, tx pgx.Tx) error {
			if _, err := balances.Apply(ctx, tx, batchID, schema, recs); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO audit (batch_id) VALUES ($1)", batchID)
			return err
		})
		return err
	}, foreachbatch.WithIdempotent(), foreachbatch.WithStart(func(ctx context.Context, _ string) error {
		return guard.Start(ctx)
	}))
	_ = sink // hand it to the query as its sink
}
