// Command crashprog is the process the Iceberg crash tests kill. It runs a
// stateless query into an Iceberg table, with the fault points armed by
// ONCEFLOW_FAULT, and exits when the input is exhausted (trigger
// AvailableNow). The input is a bounded counter (rows i = 0 … rows-1), or
// with -from an Iceberg table of the same catalog.
//
//	crashprog -catalog sqlite:PATH [-warehouse s3://b/p] -checkpoint DIR -table ns.t
//	          [-from ns.src] [-rows N -per-batch M] [-partition-day ts]
//
// For s3:// warehouses it reads ONCEFLOW_S3_ENDPOINT and the AWS_* variables.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/iceberg"
	"github.com/onceflow/onceflow/storage"
)

func main() {
	catURI := flag.String("catalog", "", "catalog URI")
	warehouse := flag.String("warehouse", "", "warehouse location")
	cpDir := flag.String("checkpoint", "", "checkpoint directory")
	name := flag.String("table", "", "output table")
	from := flag.String("from", "", "input Iceberg table (default: the counter)")
	rows := flag.Int64("rows", 1000, "counter rows")
	perBatch := flag.Int64("per-batch", 100, "counter rows per batch")
	flag.Parse()
	if err := run(*catURI, *warehouse, *cpDir, *name, *from, *rows, *perBatch); err != nil {
		fmt.Fprintln(os.Stderr, "crashprog:", err)
		os.Exit(1)
	}
}

func run(catURI, warehouse, cpDir, name, from string, rows, perBatch int64) error {
	ctx := context.Background()
	opts := []iceberg.CatalogOption{}
	if warehouse != "" {
		opts = append(opts, iceberg.WithWarehouse(warehouse))
	}
	if ep := os.Getenv("ONCEFLOW_S3_ENDPOINT"); ep != "" {
		opts = append(opts, iceberg.WithS3(iceberg.S3Config{Endpoint: ep, PathStyle: true}))
	}
	cat, err := iceberg.OpenCatalog(ctx, catURI, opts...)
	if err != nil {
		return err
	}
	defer cat.Close()
	cp, err := storage.OpenLocal(cpDir, storage.LocalOptions{})
	if err != nil {
		return err
	}
	var src engine.Source = &counter{total: rows, perBatch: perBatch}
	if from != "" {
		isrc, err := iceberg.NewSource(ctx, cat, from, iceberg.WithMaxSnapshotsPerTrigger(1))
		if err != nil {
			return err
		}
		src = isrc
	}
	sink, err := iceberg.NewSink(cat, name, iceberg.WithPartitionSpec(iceberg.Day("ts"), iceberg.Bucket("key", 2)))
	if err != nil {
		return err
	}
	q, err := engine.NewQuery(engine.ReadStream(src),
		engine.WithOutputMode(engine.Append),
		engine.WithName("iceberg-crashprog"),
		engine.WithCheckpoint(cp),
		engine.WithSink(sink),
		engine.WithTrigger(engine.AvailableNow()),
	)
	if err != nil {
		return err
	}
	return q.Run(ctx)
}

// Schema is the counter's schema: i, key k<i%5>, amount i*7, ts i hours.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "i", Type: arrow.PrimitiveTypes.Int64},
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

type counter struct{ total, perBatch int64 }

func (c *counter) Schema() *arrow.Schema { return Schema }
func (c *counter) Description() string   { return "counter" }
func (c *counter) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (c *counter) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	s, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(strconv.FormatInt(min(s+c.perBatch, c.total), 10)), nil
}
func (c *counter) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	s, _ := strconv.ParseInt(string(start), 10, 64)
	e, _ := strconv.ParseInt(string(end), 10, 64)
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	kb := array.NewStringBuilder(memory.DefaultAllocator)
	ab := array.NewInt64Builder(memory.DefaultAllocator)
	tb := array.NewTimestampBuilder(memory.DefaultAllocator, Schema.Field(3).Type.(*arrow.TimestampType))
	for i := s; i < e; i++ {
		ib.Append(i)
		kb.Append("k" + strconv.FormatInt(i%5, 10))
		ab.Append(i * 7)
		tb.Append(arrow.Timestamp(i * 3_600_000_000))
	}
	cols := []arrow.Array{ib.NewArray(), kb.NewArray(), ab.NewArray(), tb.NewArray()}
	rec := array.NewRecordBatch(Schema, cols, e-s)
	for _, col := range cols {
		col.Release()
	}
	defer rec.Release()
	return emit(rec)
}
