-- The SQL twin of examples/lake: payment files (JSON lines) landing in a
-- directory become a Parquet table partitioned by day, exactly once.
--
--   LAKE_INPUT=./landing LAKE_TABLE=./table onceflow run -checkpoint-root ./ckpt examples/sql/lake.sql

CREATE SOURCE landing (
  payment_id   text,
  merchant_id  text,
  amount_cents bigint,
  ts           timestamp
) WITH (connector = 'files', path = '${LAKE_INPUT}', format = 'json');

CREATE SINK lake WITH (
  connector    = 'files',
  path         = '${LAKE_TABLE}',
  partition_by = 'day',
  trigger      = '1s'
) AS
SELECT payment_id, merchant_id, amount_cents, ts, to_char(ts, 'YYYY-MM-DD') AS day
FROM landing;
