package sql

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/iceberg"
)

// The iceberg connector: a source streaming a table's appends and an
// exactly-once sink, through the catalog catalog_uri names (sqlite:PATH,
// postgres://…, rest+https://…).

// icebergCatalog reads the catalog options shared by the source and the
// sink into a function that opens the catalog.
func icebergCatalog(o *options) (func(ctx context.Context) (*iceberg.Catalog, error), error) {
	uri, err := o.required("catalog_uri", "sqlite:PATH, postgres://… or rest+https://…; write credentials as '${ENV_VAR}'")
	if err != nil {
		return nil, err
	}
	var opts []iceberg.CatalogOption
	if o.has("warehouse") {
		opts = append(opts, iceberg.WithWarehouse(o.str("warehouse", "")))
	}
	var s3 iceberg.S3Config
	useS3 := false
	for _, k := range []struct {
		name string
		dst  *string
	}{
		{"s3_endpoint", &s3.Endpoint}, {"s3_region", &s3.Region},
		{"s3_access_key_id", &s3.AccessKeyID}, {"s3_secret_access_key", &s3.SecretAccessKey},
	} {
		if o.has(k.name) {
			*k.dst = o.str(k.name, "")
			useS3 = true
		}
	}
	ps, err := o.bool("s3_path_style", false)
	if err != nil {
		return nil, err
	}
	if o.has("s3_path_style") {
		s3.PathStyle, useS3 = ps, true
	}
	if useS3 {
		opts = append(opts, iceberg.WithS3(s3))
	}
	return func(ctx context.Context) (*iceberg.Catalog, error) {
		return iceberg.OpenCatalog(ctx, uri, opts...)
	}, nil
}

var partitionRE = regexp.MustCompile(`^(?:(identity|day|hour)\((\w+)\)|bucket\((\d+),\s*(\w+)\)|(\w+))$`)

// icebergPartitions reads partition_by: 'col, day(ts), hour(ts),
// bucket(16, col)' (a bare column is identity).
func icebergPartitions(o *options, cols []string) ([]iceberg.Partition, error) {
	if !o.has("partition_by") {
		return nil, nil
	}
	var out []iceberg.Partition
	raw := o.str("partition_by", "")
	// split on commas outside parentheses
	var parts []string
	depth, last := 0, 0
	for i, r := range raw {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, raw[last:i])
				last = i + 1
			}
		}
	}
	parts = append(parts, raw[last:])
	for _, p := range parts {
		m := partitionRE.FindStringSubmatch(strings.TrimSpace(p))
		if m == nil {
			return nil, o.errAt("partition_by", "%q: a partition is a column, day(col), hour(col) or bucket(n, col)", strings.TrimSpace(p))
		}
		var pt iceberg.Partition
		switch {
		case m[1] != "":
			pt = iceberg.Partition{Column: m[2], Transform: m[1]}
		case m[3] != "":
			n, _ := strconv.Atoi(m[3])
			pt = iceberg.Bucket(m[4], n)
		default:
			pt = iceberg.Identity(m[5])
		}
		if cols != nil && !contains(cols, pt.Column) {
			return nil, o.errAt("partition_by", "%q is not a column of the query (%s)", pt.Column, strings.Join(cols, ", "))
		}
		out = append(out, pt)
	}
	return out, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// icebergSinkOpener reads the sink's options.
func icebergSinkOpener(s *Sink) (func(ctx context.Context, cfg *config) (engine.Sink, func() error, error), error) {
	o := s.opts
	openCat, err := icebergCatalog(o)
	if err != nil {
		return nil, err
	}
	table, err := o.required("table", "namespace.table")
	if err != nil {
		return nil, err
	}
	var opts []iceberg.SinkOption
	parts, err := icebergPartitions(o, s.q.cols)
	if err != nil {
		return nil, err
	}
	if parts != nil {
		opts = append(opts, iceberg.WithPartitionSpec(parts...))
	}
	switch s.Mode {
	case engine.Update:
		keys := o.list("key_columns")
		if len(keys) == 0 {
			return nil, o.errAt("output_mode", "update writes an Iceberg row delta by key: option key_columns is required")
		}
		opts = append(opts, iceberg.WithMode(iceberg.Update), iceberg.WithKeys(keys...))
	case engine.Complete:
		opts = append(opts, iceberg.WithMode(iceberg.Complete))
	}
	if n, err := o.int64("target_file_size", 0); err != nil {
		return nil, err
	} else if n > 0 {
		opts = append(opts, iceberg.WithTargetFileSize(n))
	}
	if o.has("commit_retries") {
		n, err := o.int64("commit_retries", 0)
		if err != nil {
			return nil, err
		}
		opts = append(opts, iceberg.WithCommitRetries(int(n)))
	}
	return func(ctx context.Context, cfg *config) (engine.Sink, func() error, error) {
		cat, err := openCat(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("sink %s: %w", s.Name, err)
		}
		sk, err := iceberg.NewSink(cat, table, opts...)
		if err != nil {
			return nil, nil, errors.Join(err, cat.Close())
		}
		return sk, cat.Close, nil
	}, nil
}

// icebergSourceOptions reads the source's options.
func icebergSourceOptions(src *sourceDef) (func(ctx context.Context) (*iceberg.Catalog, error), string, []iceberg.SourceOption, error) {
	o := src.opts
	openCat, err := icebergCatalog(o)
	if err != nil {
		return nil, "", nil, err
	}
	table, err := o.required("table", "namespace.table")
	if err != nil {
		return nil, "", nil, err
	}
	var opts []iceberg.SourceOption
	if o.has("starting_snapshot") {
		n, err := o.int64("starting_snapshot", 0)
		if err != nil {
			return nil, "", nil, err
		}
		opts = append(opts, iceberg.WithStartingSnapshot(n))
	}
	for _, b := range []struct {
		name string
		opt  iceberg.SourceOption
	}{{"start_at_latest", iceberg.WithStartAtLatest()}, {"skip_overwrites", iceberg.WithSkipOverwrites()}} {
		v, err := o.bool(b.name, false)
		if err != nil {
			return nil, "", nil, err
		}
		if v {
			opts = append(opts, b.opt)
		}
	}
	if n, err := o.int64("max_snapshots_per_trigger", 0); err != nil {
		return nil, "", nil, err
	} else if n > 0 {
		opts = append(opts, iceberg.WithMaxSnapshotsPerTrigger(int(n)))
	}
	return openCat, table, opts, nil
}

// openIcebergSource opens the table's source and checks that its schema
// has the declared columns.
func openIcebergSource(ctx context.Context, src *sourceDef) (engine.Source, func() error, error) {
	openCat, table, opts, err := icebergSourceOptions(src)
	if err != nil {
		return nil, nil, err
	}
	cat, err := openCat(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("source %s: %w", src.name, err)
	}
	is, err := iceberg.NewSource(ctx, cat, table, opts...)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("source %s: %w", src.name, err), cat.Close())
	}
	if !sameColumns(is.Schema(), src.schema) {
		return nil, nil, errors.Join(fmt.Errorf("source %s: the table %s has the columns %s, the declaration %s", src.name, table, fieldList(is.Schema()), fieldList(src.schema)), cat.Close())
	}
	return is, cat.Close, nil
}

func sameColumns(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i, f := range a.Fields() {
		g := b.Field(i)
		if f.Name != g.Name || !arrow.TypeEqual(f.Type, g.Type) {
			return false
		}
	}
	return true
}
