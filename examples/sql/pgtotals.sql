-- The SQL twin of examples/pgtotals: payment files into per-merchant totals
-- in PostgreSQL, exactly once: each batch's deltas and the job's progress
-- row commit in one transaction.
--
--   PGTOTALS_INPUT=./landing PG_DSN=postgres://… onceflow run -checkpoint-root ./ckpt examples/sql/pgtotals.sql

CREATE SOURCE landing (
  payment_id   text,
  merchant_id  text,
  amount_cents bigint,
  ts           timestamp
) WITH (connector = 'files', path = '${PGTOTALS_INPUT}', format = 'json');

CREATE SINK pgtotals WITH (
  connector     = 'postgres',
  dsn           = '${PG_DSN}',
  table         = 'merchant_totals',
  key_columns   = 'merchant_id',
  merge_add     = 'total_cents, payments',
  create_tables = 'true',
  output_mode   = 'update',
  trigger       = '1s'
) AS
SELECT /*+ id('merchant-totals') */
       merchant_id,
       batch_sum(amount_cents) AS total_cents,
       batch_count(*)          AS payments
FROM landing
GROUP BY merchant_id;
