// Command lake is examples/lake with -format iceberg: it appends payments
// landing as JSON-lines files in a directory to an Iceberg table
// partitioned by day(ts) and bucket(8, merchant_id), one row per payment,
// exactly once. The files source logs which files each batch took; the
// Iceberg sink commits each batch as one snapshot tagged with the query
// and batch id, which a replay finds and skips.
//
// A landing file holds one payment per line:
//
//	{"payment_id": "p-…", "merchant_id": "m-…", "amount_cents": 1234, "ts": "2026-11-30T10:00:00.123Z"}
//
//	lake -format iceberg -input DIR -checkpoint DIR
//	     [-catalog sqlite:PATH|postgres://…] [-warehouse DIR|s3://bucket/prefix]
//	     [-table lake.payments] [-trigger 1s|available-now] [-generate N]
//
// The default catalog is an SQLite file next to the checkpoint
// (<checkpoint>/../catalog.db) and the default warehouse a directory
// beside it. An s3:// warehouse takes its endpoint from ONCEFLOW_S3_ENDPOINT
// (path-style addressing) and its credentials and region from the AWS
// environment. -format files is the engine's own examples/lake.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/iceberg"
	"github.com/onceflow/onceflow/source/files"
	"github.com/onceflow/onceflow/storage"
)

// Schema is a landing file's payment.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "payment_id", Type: arrow.BinaryTypes.String},
	{Name: "merchant_id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "lake:", err)
		os.Exit(1)
	}
}

func run() error {
	format := flag.String("format", "iceberg", "iceberg (this program); files is examples/lake in the engine module")
	input := flag.String("input", "", "landing directory of payment JSON-lines files (required)")
	cpDir := flag.String("checkpoint", "", "checkpoint directory (required)")
	catURI := flag.String("catalog", "", "catalog: sqlite:PATH or postgres://… (default sqlite:<checkpoint>/../catalog.db)")
	warehouse := flag.String("warehouse", "", "where tables go: a directory or s3://bucket/prefix (default beside the catalog)")
	name := flag.String("table", "lake.payments", "table name, namespace.table")
	trigger := flag.String("trigger", "1s", "processing-time interval, or available-now")
	generate := flag.Int("generate", 0, "first land N deterministic payments in -input")
	flag.Parse()
	if *format != "iceberg" {
		return fmt.Errorf("-format %q: this is the Iceberg build of examples/lake; for -format files run examples/lake of the engine module", *format)
	}
	if *input == "" || *cpDir == "" {
		return errors.New("-input and -checkpoint are required")
	}
	if *generate > 0 {
		if err := land(*input, *generate); err != nil {
			return err
		}
	}
	if *catURI == "" {
		abs, err := filepath.Abs(*cpDir)
		if err != nil {
			return err
		}
		*catURI = "sqlite:" + filepath.Join(filepath.Dir(abs), "catalog.db")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts := []iceberg.CatalogOption{}
	if *warehouse != "" {
		opts = append(opts, iceberg.WithWarehouse(*warehouse))
	}
	if ep := os.Getenv("ONCEFLOW_S3_ENDPOINT"); ep != "" {
		opts = append(opts, iceberg.WithS3(iceberg.S3Config{Endpoint: ep, PathStyle: true}))
	}
	cat, err := iceberg.OpenCatalog(ctx, *catURI, opts...)
	if err != nil {
		return err
	}
	defer cat.Close()
	cp, err := storage.OpenLocal(*cpDir, storage.LocalOptions{})
	if err != nil {
		return err
	}
	src, err := files.New(*input, files.JSON, Schema)
	if err != nil {
		return err
	}
	sink, err := iceberg.NewSink(cat, *name,
		iceberg.WithPartitionSpec(iceberg.Day("ts"), iceberg.Bucket("merchant_id", 8)))
	if err != nil {
		return err
	}
	trig, err := engine.ParseTrigger(*trigger)
	if err != nil {
		return err
	}
	q, err := engine.NewQuery(engine.ReadStream(src),
		engine.WithName("lake-iceberg"),
		engine.WithOutputMode(engine.Append),
		engine.WithCheckpoint(cp),
		engine.WithSink(sink),
		engine.WithTrigger(trig),
	)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		q.Stop()
	}()
	if err := q.Run(context.Background()); err != nil {
		return err
	}
	if p := q.LastProgress(); p != nil {
		fmt.Printf("batch %d: %d payments into %s\n", p.BatchID, p.NumInputRows, sink.Description())
	}
	return nil
}

// land writes n deterministic payments into dir, 1000 a file, named
// payments-<k>.json (written under a dot name, then renamed).
func land(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for k := 0; k*1000 < n; k++ {
		name := filepath.Join(dir, fmt.Sprintf("payments-%06d.json", k))
		if _, err := os.Stat(name); err == nil {
			continue
		}
		var buf []byte
		for i := k * 1000; i < min(n, (k+1)*1000); i++ {
			line, _ := json.Marshal(map[string]any{
				"payment_id":   fmt.Sprintf("p-%08d", i),
				"merchant_id":  fmt.Sprintf("m-%03d", i*7919%97),
				"amount_cents": int64(i*37%100000 + 1),
				"ts":           base.Add(time.Duration(i) * 17 * time.Second).Format(time.RFC3339Nano),
			})
			buf = append(append(buf, line...), '\n')
		}
		tmp := filepath.Join(dir, fmt.Sprintf(".payments-%06d.json.tmp", k))
		if err := os.WriteFile(tmp, buf, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, name); err != nil {
			return err
		}
	}
	return nil
}
