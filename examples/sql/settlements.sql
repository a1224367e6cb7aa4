-- The SQL twin of examples/settlements: payments from Kafka, per-merchant
-- settlements to Kafka, exactly once (one Kafka transaction per batch).
--
--   KAFKA_BROKERS=127.0.0.1:9092 onceflow run -checkpoint-root ./ckpt examples/sql/settlements.sql

CREATE SOURCE payments (
  payment_id   text,
  merchant_id  text,
  amount_cents bigint,
  ts           timestamp
) WITH (connector = 'kafka', brokers = '${KAFKA_BROKERS}', topics = 'payments');

-- batch_sum and batch_count restart at every batch (this batch's
-- settlement); sum is the running total. batch_id() keys the record.
CREATE SINK settlements WITH (
  connector   = 'kafka',
  brokers     = '${KAFKA_BROKERS}',
  topic       = 'settlements',
  key_column  = 'merchant_id',
  output_mode = 'update',
  trigger     = '1s'
) AS
SELECT /*+ id('merchant-totals') */
       merchant_id,
       batch_id()              AS batch_id,
       batch_sum(amount_cents) AS amount_cents,
       batch_count(*)          AS payments,
       sum(amount_cents)       AS total_cents
FROM payments
GROUP BY merchant_id;
