package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/audit"
	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/foreachbatch/postgres"
	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/kafkasink"
	"github.com/onceflow/onceflow/source/files"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
)

var paymentSchema = arrow.NewSchema([]arrow.Field{
	{Name: "payment_id", Type: arrow.BinaryTypes.String},
	{Name: "merchant_id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// settlements is the settlement query's shape: per merchant, this batch's
// sum and the running total, with the batch id.
func settlements(src engine.Source) *engine.Stream {
	return engine.ReadStream(src).
		Select(
			batch.As(batch.Col("merchant_id"), "merchant_id"),
			batch.As(batch.Col("amount_cents"), "amount_cents"),
		).
		GroupBy("merchant_id").ID("merchant-totals").
		Agg(
			batch.Sum(batch.Col("amount_cents")).PerBatch().As("amount_cents"),
			batch.Sum(batch.Col("amount_cents")).As("total_cents"),
		).
		WithBatchIDColumn("batch_id")
}

func openLocal(t *testing.T, dir string) storage.Store {
	t.Helper()
	s, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func runQuery(t *testing.T, stream *engine.Stream, cp storage.Store, sinks ...engine.Sink) {
	t.Helper()
	runQueryOpts(t, stream, cp, nil, sinks...)
}

func runQueryOpts(t *testing.T, stream *engine.Stream, cp storage.Store, extra []engine.Option, sinks ...engine.Sink) {
	t.Helper()
	opts := []engine.Option{engine.WithCheckpoint(cp), engine.WithTrigger(engine.AvailableNow()), engine.WithOutputMode(engine.Update), engine.WithStatePartitions(2)}
	for _, s := range sinks {
		opts = append(opts, engine.WithSink(s))
	}
	opts = append(opts, extra...)
	q, err := engine.NewQuery(stream, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

func paymentRecords(rng *rand.Rand, from, n int) []*kgo.Record {
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		m := fmt.Sprint("m-", rng.IntN(9))
		v, _ := json.Marshal(map[string]any{"payment_id": fmt.Sprint("p-", i), "merchant_id": m, "amount_cents": 1 + rng.Int64N(9999)})
		recs = append(recs, &kgo.Record{Topic: "payments", Key: []byte(m), Value: v})
	}
	return recs
}

func kafkaSource(t *testing.T, c *kafkadev.Cluster) *kafka.Source {
	t.Helper()
	src, err := kafka.New(kafka.WithBrokers(c.Addrs()...), kafka.WithTopics("payments"), kafka.WithValueJSON(paymentSchema), kafka.WithMaxOffsetsPerTrigger(40))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	return src
}

// copyTopic writes recs to topic with their values, through a
// transaction so read_committed readers see them.
func copyTopic(t *testing.T, c *kafkadev.Cluster, topic string, recs []*kgo.Record) {
	t.Helper()
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		out[i] = &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value}
	}
	testenv.KafkaProduce(t, c, out...)
}

func batchOf(t *testing.T, r *kgo.Record) int64 {
	t.Helper()
	var s struct {
		BatchID int64 `json:"batch_id"`
	}
	if err := json.Unmarshal(r.Value, &s); err != nil {
		t.Fatal(err)
	}
	return s.BatchID
}

func wantSuspect(t *testing.T, rep *audit.Report, link string, batch int64) {
	t.Helper()
	if rep.OK() || rep.Differences() == 0 {
		t.Fatalf("audit passed a wrong output: %+v", rep)
	}
	for _, s := range rep.Suspects {
		if s.Link == link && (batch < 0 || s.Batch == batch) {
			return
		}
	}
	t.Fatalf("suspects %+v, want %q (batch %d)", rep.Suspects, link, batch)
}

// TestKafka runs the settlement query from a Kafka topic to the
// transactional Kafka sink, audits the real output, then audits outputs
// made wrong on purpose: a batch twice, a batch missing, and a record of
// a batch that was never committed.
func TestKafka(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"payments": 3, "settlements": 3, "dup": 3, "missing": 3, "extra": 3})
	testenv.KafkaProduce(t, c, paymentRecords(rand.New(rand.NewPCG(1, 2)), 0, 300)...)
	cpDir := t.TempDir()
	cp := openLocal(t, cpDir)
	sink, err := kafkasink.New(kafkasink.WithBrokers(c.Addrs()...), kafkasink.WithTopic("settlements"), kafkasink.WithName("audit-test"),
		kafkasink.WithKeyColumn("merchant_id"), kafkasink.WithValueJSON("merchant_id", "batch_id", "amount_cents", "total_cents"))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	runQuery(t, settlements(kafkaSource(t, c)), cp, sink)

	ctx := context.Background()
	cfg := func(topic string) audit.Config {
		return audit.Config{Checkpoint: cp, Input: audit.KafkaInput(c.Addrs(), "payments"), Output: audit.KafkaOutput(c.Addrs(), topic),
			Key: "merchant_id", Value: "amount_cents", BatchColumn: "batch_id"}
	}
	rep, err := audit.Run(ctx, cfg("settlements"))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.MatchedBatch != rep.LastCommitted || rep.InputRows != 300 || rep.StartFrom != "offsets/0" {
		t.Fatalf("clean output: %+v", rep)
	}
	if rep.LastCommitted < 3 {
		t.Fatalf("only %d batches; the test wants several", rep.LastCommitted+1)
	}

	good := testenv.KafkaReadCommitted(t, c, "settlements", 0)
	const victim = 2
	var dup, missing, extra []*kgo.Record
	for _, r := range good {
		b := batchOf(t, r)
		if b != victim {
			missing = append(missing, r)
		}
		dup = append(dup, r)
		if b == victim {
			dup = append(dup, r)
		}
	}
	extra = append(extra, good...)
	v, _ := json.Marshal(map[string]any{"merchant_id": "m-1", "batch_id": rep.LastCommitted + 2, "amount_cents": 5})
	extra = append(extra, &kgo.Record{Key: []byte("m-1"), Value: v})
	copyTopic(t, c, "dup", dup)
	copyTopic(t, c, "missing", missing)
	copyTopic(t, c, "extra", extra)

	for _, tc := range []struct {
		topic string
		link  string
		batch int64
	}{
		{"dup", audit.SuspectDoubleApplied, victim},
		{"missing", audit.SuspectSourceGap, victim},
		{"extra", audit.SuspectUncommittedVisible, rep.LastCommitted + 2},
	} {
		t.Run(tc.topic, func(t *testing.T) {
			rep, err := audit.Run(ctx, cfg(tc.topic))
			if err != nil {
				t.Fatal(err)
			}
			wantSuspect(t, rep, tc.link, tc.batch)
		})
	}
	t.Run("value column", func(t *testing.T) {
		// total_cents summed over batches is not the input's sum.
		c := cfg("settlements")
		c.OutputValue = "total_cents"
		rep, err := audit.Run(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() {
			t.Fatal("summing running totals matched the input")
		}
	})
}

// TestPending: an output that holds batch C+1, made visible before
// commits/C+1, matches C+1 and the report says so.
func TestPending(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"payments": 2, "settlements": 2})
	rng := rand.New(rand.NewPCG(3, 4))
	testenv.KafkaProduce(t, c, paymentRecords(rng, 0, 100)...)
	cpDir := t.TempDir()
	cp := openLocal(t, cpDir)
	sink, err := kafkasink.New(kafkasink.WithBrokers(c.Addrs()...), kafkasink.WithTopic("settlements"), kafkasink.WithName("pending"),
		kafkasink.WithKeyColumn("merchant_id"), kafkasink.WithValueJSON("merchant_id", "batch_id", "amount_cents"))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	runQuery(t, settlements(kafkaSource(t, c)), cp, sink)
	// Remove the last commit: the sink's output of that batch stays, as
	// after a crash between the sink and commits/N.
	ids, err := cp.List(context.Background(), "commits/")
	if err != nil {
		t.Fatal(err)
	}
	last := ids[len(ids)-1]
	if err := os.Remove(filepath.Join(cpDir, last.Name)); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Run(context.Background(), audit.Config{Checkpoint: cp, Input: audit.KafkaInput(c.Addrs(), "payments"),
		Output: audit.KafkaOutput(c.Addrs(), "settlements"), Key: "merchant_id", Value: "amount_cents", BatchColumn: "batch_id"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.MatchedBatch != rep.LastCommitted+1 || rep.Pending != rep.MatchedBatch {
		t.Fatalf("want a match against the pending batch: %+v", rep)
	}
}

// TestLake reads a landing directory through the files source and its
// checkpoint log, writes a file-sink table, and audits it; then a copy of
// the table with one batch left out and one with a batch added twice.
func TestLake(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	land := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 6))
	for f := 0; f < 6; f++ {
		var b []byte
		for i := 0; i < 20; i++ {
			line, _ := json.Marshal(map[string]any{"payment_id": fmt.Sprint(f, "-", i), "merchant_id": fmt.Sprint("m-", rng.IntN(7)), "amount_cents": 1 + rng.Int64N(999), "note": "x"})
			b = append(append(b, line...), '\n')
		}
		if err := os.WriteFile(filepath.Join(land, fmt.Sprintf("p%d.json", f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := files.New(land, files.JSON, paymentSchema, files.WithMaxFilesPerTrigger(2), files.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	cp := openLocal(t, t.TempDir())
	lakeRoot := openLocal(t, t.TempDir())
	sink, err := filesink.New(storage.Sub(lakeRoot, "good"))
	if err != nil {
		t.Fatal(err)
	}
	runQuery(t, settlements(src), cp, sink)

	cfg := func(table string) audit.Config {
		return audit.Config{Checkpoint: cp, Input: audit.FilesInput(land, files.JSON), Output: audit.LakeOutput(storage.Sub(lakeRoot, table)),
			Key: "merchant_id", Value: "amount_cents", BatchColumn: "batch_id"}
	}
	rep, err := audit.Run(ctx, cfg("good"))
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.InputRows != 120 || rep.LastCommitted != 2 {
		t.Fatalf("clean lake: %+v", rep)
	}

	// Copy the table's rows per batch into wrong tables.
	type row struct {
		m     string
		b, am int64
	}
	byBatch := map[int64][]row{}
	if err := filesink.ReadRows(ctx, storage.Sub(lakeRoot, "good"), func(_ filesink.File, cols []string, r []any) error {
		var x row
		for i, c := range cols {
			switch c {
			case "merchant_id":
				x.m = r[i].(string)
			case "batch_id":
				x.b = r[i].(int64)
			case "amount_cents":
				x.am = r[i].(int64)
			}
		}
		byBatch[x.b] = append(byBatch[x.b], x)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sc := arrow.NewSchema([]arrow.Field{{Name: "merchant_id", Type: arrow.BinaryTypes.String}, {Name: "batch_id", Type: arrow.PrimitiveTypes.Int64}, {Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64}}, nil)
	write := func(table string, batches [][]row) {
		s, err := filesink.New(storage.Sub(lakeRoot, table))
		if err != nil {
			t.Fatal(err)
		}
		for id, rows := range batches {
			b := array.NewRecordBuilder(mem, sc)
			for _, r := range rows {
				b.Field(0).(*array.StringBuilder).Append(r.m)
				b.Field(1).(*array.Int64Builder).Append(r.b)
				b.Field(2).(*array.Int64Builder).Append(r.am)
			}
			rec := b.NewRecordBatch()
			b.Release()
			err := s.AddBatch(ctx, int64(id), sc, []arrow.RecordBatch{rec})
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	write("missing", [][]row{byBatch[0], byBatch[2]})
	write("dup", [][]row{byBatch[0], byBatch[1], byBatch[2], byBatch[1]})
	for _, tc := range []struct {
		table string
		link  string
		batch int64
	}{
		{"missing", audit.SuspectSourceGap, 1},
		{"dup", audit.SuspectDoubleApplied, 1},
	} {
		t.Run(tc.table, func(t *testing.T) {
			rep, err := audit.Run(ctx, cfg(tc.table))
			if err != nil {
				t.Fatal(err)
			}
			wantSuspect(t, rep, tc.link, tc.batch)
		})
	}
}

// TestPostgres audits an offsets-in-sink table holding one cumulative row
// per merchant (amounts merged by addition), then the same table doctored:
// a key's batch applied twice, a key deleted, a key the input never had.
func TestPostgres(t *testing.T) {
	pool := testenv.PG(t)
	c := testenv.Kafka(t, map[string]int32{"payments": 2})
	testenv.KafkaProduce(t, c, paymentRecords(rand.New(rand.NewPCG(8, 9)), 0, 200)...)
	cp := openLocal(t, t.TempDir())
	sink, err := postgres.NewOffsetsInSink(pool, "audit-test", "totals", postgres.WithCreateTables(true),
		postgres.WithKeyColumns("merchant_id"), postgres.WithMerge(postgres.MergeAdd, "amount_cents"))
	if err != nil {
		t.Fatal(err)
	}
	runQuery(t, settlements(kafkaSource(t, c)), cp, sink)
	ctx := context.Background()
	cfg := audit.Config{Checkpoint: cp, Input: audit.KafkaInput(c.Addrs(), "payments"), Output: audit.PostgresOutput(pool, "totals"),
		Key: "merchant_id", Value: "amount_cents", BatchColumn: "batch_id"}
	for _, col := range []string{"amount_cents", "total_cents"} {
		cfg.OutputValue = col
		rep, err := audit.Run(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() || !rep.Cumulative {
			t.Fatalf("clean table, column %s: %+v", col, rep)
		}
	}
	cfg.OutputValue = "total_cents"
	for _, tc := range []struct {
		name, sql, link string
	}{
		{"double", "UPDATE totals SET total_cents = total_cents + amount_cents WHERE merchant_id = 'm-3'", audit.SuspectDoubleApplied},
		{"missing", "DELETE FROM totals WHERE merchant_id = 'm-4'", audit.SuspectSourceGap},
		{"extra", "INSERT INTO totals (merchant_id, amount_cents, total_cents, batch_id) VALUES ('m-none', 1, 1, 0)", audit.SuspectUncommittedVisible},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := pool.Exec(ctx, tc.sql); err != nil {
				t.Fatal(err)
			}
			rep, err := audit.Run(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			wantSuspect(t, rep, tc.link, -1)
		})
	}
}

// TestPurged: once offsets/0 is purged the recomputation starts at the
// source's initial offset, and the report says so.
func TestPurged(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"payments": 2, "settlements": 2})
	testenv.KafkaProduce(t, c, paymentRecords(rand.New(rand.NewPCG(6, 7)), 0, 200)...)
	cp := openLocal(t, t.TempDir())
	sink, err := kafkasink.New(kafkasink.WithBrokers(c.Addrs()...), kafkasink.WithTopic("settlements"), kafkasink.WithName("purged"),
		kafkasink.WithKeyColumn("merchant_id"), kafkasink.WithValueJSON("merchant_id", "batch_id", "amount_cents"))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	runQueryOpts(t, settlements(kafkaSource(t, c)), cp, []engine.Option{engine.WithMinBatchesToRetain(1)}, sink)
	if ok, err := offsetsHas(cp, 0); err != nil || ok {
		t.Fatalf("offsets/0 still there (%v): the test needs it purged", err)
	}
	rep, err := audit.Run(context.Background(), audit.Config{Checkpoint: cp, Input: audit.KafkaInput(c.Addrs(), "payments"),
		Output: audit.KafkaOutput(c.Addrs(), "settlements"), Key: "merchant_id", Value: "amount_cents", BatchColumn: "batch_id"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.StartFrom != "initial offset (offsets/0 purged)" || rep.InputRows != 200 {
		t.Fatalf("purged start: %+v", rep)
	}
}

func offsetsHas(cp storage.Store, id int64) (bool, error) {
	_, err := cp.Get(context.Background(), fmt.Sprintf("offsets/%020d", id))
	if storage.IsNotExist(err) {
		return false, nil
	}
	return err == nil, err
}

// TestErrors: a checkpoint without a commit and a missing column are
// errors, not differences.
func TestErrors(t *testing.T) {
	c := testenv.Kafka(t, map[string]int32{"payments": 1})
	cp := openLocal(t, t.TempDir())
	_, err := audit.Run(context.Background(), audit.Config{Checkpoint: cp, Input: audit.KafkaInput(c.Addrs(), "payments"),
		Output: audit.KafkaOutput(c.Addrs(), "payments"), Key: "merchant_id", Value: "amount_cents"})
	if !errors.Is(err, audit.ErrNoCommit) {
		t.Fatalf("empty checkpoint: %v, want ErrNoCommit", err)
	}
	if _, err := audit.Run(context.Background(), audit.Config{}); !errors.Is(err, audit.ErrConfig) {
		t.Fatalf("empty config: %v, want ErrConfig", err)
	}
}

// TestLakeS3: the checkpoint and the file-sink table on S3.
func TestLakeS3(t *testing.T) {
	s3 := testenv.S3(t)
	c := testenv.Kafka(t, map[string]int32{"payments": 2})
	testenv.KafkaProduce(t, c, paymentRecords(rand.New(rand.NewPCG(10, 11)), 0, 150)...)
	cp := storage.Sub(s3, "checkpoint")
	table := storage.Sub(s3, "lake/settlements")
	sink, err := filesink.New(table)
	if err != nil {
		t.Fatal(err)
	}
	runQuery(t, settlements(kafkaSource(t, c)), cp, sink)
	rep, err := audit.Run(context.Background(), audit.Config{Checkpoint: cp, Input: audit.KafkaInput(c.Addrs(), "payments"),
		Output: audit.LakeOutput(table), Key: "merchant_id", Value: "amount_cents", BatchColumn: "batch_id"})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.InputRows != 150 || rep.LastCommitted < 2 {
		t.Fatalf("lake on S3: %+v", rep)
	}
}
