package sql

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/onceflow/onceflow/consolesink"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/foreachbatch/postgres"
	"github.com/onceflow/onceflow/kafkasink"
	"github.com/onceflow/onceflow/source/files"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/source/rate"
	"github.com/onceflow/onceflow/storage"
)

// The connectors and their options. Each WITH option is read here; an
// option no connector reads fails the compilation, naming those it has.

var (
	sourceConnectors = "kafka, files, rate or iceberg"
	sinkConnectors   = "kafka, files, postgres, iceberg or console"
	commonSinkOpts   = []string{"connector", "trigger", "output_mode", "checkpoint", "state_partitions", "min_batches_to_retain", "snapshot_every"}
)

// sourceSchema is the schema the source emits: for kafka, its metadata
// columns and the declared value columns; for files, the declared columns;
// for rate, its fixed columns.
func (c *compiler) sourceSchema(src *sourceDef, fields []arrow.Field) (*arrow.Schema, error) {
	o := src.opts
	switch src.connector {
	case "kafka":
		if len(fields) == 0 {
			return nil, c.errAt(-1, false, "source %s: declare the columns of the JSON values", src.name)
		}
		if _, err := kafkaSourceOptions(src); err != nil {
			return nil, err
		}
		k, err := kafka.New(kafka.WithBrokers("127.0.0.1:9"), kafka.WithTopics("schema"), kafka.WithValueJSON(arrow.NewSchema(fields, nil)))
		if err != nil {
			return nil, c.errAt(-1, false, "source %s: %v", src.name, err)
		}
		defer k.Close()
		return k.Schema(), o.unknown()
	case "files":
		if len(fields) == 0 {
			return nil, c.errAt(-1, false, "source %s: declare the columns of the files", src.name)
		}
		if _, _, err := filesSourceOptions(src); err != nil {
			return nil, err
		}
		return arrow.NewSchema(fields, nil), o.unknown()
	case "rate":
		if _, err := rateOptions(src); err != nil {
			return nil, err
		}
		s := rate.Schema()
		if len(fields) > 0 {
			if len(fields) != s.NumFields() {
				return nil, c.errAt(-1, false, "source %s: the rate source has the columns %s; declare them all or none", src.name, fieldList(s))
			}
			for i, f := range fields {
				if f.Name != s.Field(i).Name || !arrow.TypeEqual(f.Type, s.Field(i).Type) {
					return nil, c.errAt(-1, false, "source %s: the rate source has the columns %s; declare them all or none", src.name, fieldList(s))
				}
			}
		}
		return s, o.unknown()
	case "iceberg":
		if len(fields) == 0 {
			return nil, c.errAt(-1, false, "source %s: declare the columns of the table", src.name)
		}
		if _, _, _, err := icebergSourceOptions(src); err != nil {
			return nil, err
		}
		return arrow.NewSchema(fields, nil), o.unknown()
	case "":
		return nil, c.errAt(-1, false, "source %s: option connector is required (%s)", src.name, sourceConnectors)
	}
	return nil, c.errAt(o.vals["connector"].loc, true, "source %s: connector %s is not supported; the source connectors are %s", src.name, o.show("connector"), sourceConnectors)
}

func fieldList(s *arrow.Schema) string {
	var parts []string
	for _, f := range s.Fields() {
		parts = append(parts, f.Name+" "+f.Type.String())
	}
	return strings.Join(parts, ", ")
}

func kafkaSourceOptions(src *sourceDef) ([]kafka.Option, error) {
	o := src.opts
	var out []kafka.Option
	brokers, err := o.required("brokers", "host:port,…")
	if err != nil {
		return nil, err
	}
	out = append(out, kafka.WithBrokers(strings.Split(brokers, ",")...))
	switch {
	case o.has("topics"):
		out = append(out, kafka.WithTopics(o.list("topics")...))
	case o.has("topic"):
		out = append(out, kafka.WithTopics(o.list("topic")...))
	case o.has("topic_pattern"):
		out = append(out, kafka.WithTopicPattern(o.str("topic_pattern", "")))
	default:
		return nil, o.c.errAt(-1, false, "source %s: option topics (or topic_pattern) is required", src.name)
	}
	if f := o.str("format", "json"); f != "json" {
		return nil, o.errAt("format", "%s: the kafka source reads JSON values into the declared columns (format = 'json')", o.show("format"))
	}
	switch v := o.str("starting_offsets", "earliest"); v {
	case "earliest":
		out = append(out, kafka.WithStartingOffsets(kafka.Earliest()))
	case "latest":
		out = append(out, kafka.WithStartingOffsets(kafka.Latest()))
	default:
		out = append(out, kafka.WithStartingOffsets(kafka.SpecificOffsets(v)))
	}
	n, err := o.int64("max_offsets_per_trigger", 0)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		out = append(out, kafka.WithMaxOffsetsPerTrigger(n))
	}
	fail, err := o.bool("fail_on_data_loss", true)
	if err != nil {
		return nil, err
	}
	out = append(out, kafka.WithFailOnDataLoss(fail))
	if src.tombstones {
		out = append(out, kafka.WithTombstones())
	}
	if o.has("dead_letter_topic") {
		out = append(out, kafka.WithDeadLetterTopic(o.str("dead_letter_topic", "")))
	}
	if o.has("dead_letter_dir") {
		out = append(out, kafka.WithDeadLetterDir(o.str("dead_letter_dir", "")))
	}
	m, err := saslMechanism(o)
	if err != nil {
		return nil, err
	}
	if m != nil {
		out = append(out, kafka.WithSASL(m))
	}
	return out, nil
}

func filesSourceOptions(src *sourceDef) (files.Format, []files.Option, error) {
	o := src.opts
	if _, err := o.required("path", "the directory the files land in"); err != nil {
		return 0, nil, err
	}
	var f files.Format
	switch v := o.str("format", "json"); v {
	case "json":
		f = files.JSON
	case "csv":
		f = files.CSV
	case "parquet":
		f = files.Parquet
	default:
		return 0, nil, o.errAt("format", "%s: the formats are json, csv and parquet", o.show("format"))
	}
	var out []files.Option
	if o.has("glob") {
		out = append(out, files.WithGlob(o.str("glob", "")))
	}
	n, err := o.int64("max_files_per_trigger", 0)
	if err != nil {
		return 0, nil, err
	}
	if n > 0 {
		out = append(out, files.WithMaxFilesPerTrigger(int(n)))
	}
	if o.has("min_file_age") {
		d, err := o.duration("min_file_age", 0)
		if err != nil {
			return 0, nil, err
		}
		out = append(out, files.WithMinFileAge(d))
	}
	if o.has("dead_letter") {
		out = append(out, files.WithDeadLetter(o.str("dead_letter", "")))
	}
	if o.has("timestamp_layout") {
		out = append(out, files.WithTimestampLayout(o.str("timestamp_layout", "")))
	}
	h, err := o.bool("csv_header", false)
	if err != nil {
		return 0, nil, err
	}
	if o.has("csv_header") {
		out = append(out, files.WithCSVHeader(h))
	}
	return f, out, nil
}

func rateOptions(src *sourceDef) ([]rate.Option, error) {
	o := src.opts
	var out []rate.Option
	for _, k := range []struct {
		name string
		opt  func(int64) rate.Option
	}{
		{"rows_per_second", rate.WithRowsPerSecond},
		{"keys", rate.WithKeys},
		{"max_rows_per_trigger", rate.WithMaxRowsPerTrigger},
		{"partitions", func(n int64) rate.Option { return rate.WithPartitions(int32(n)) }},
	} {
		if o.has(k.name) {
			n, err := o.int64(k.name, 0)
			if err != nil {
				return nil, err
			}
			out = append(out, k.opt(n))
		}
	}
	return out, nil
}

func checkSinkConnector(c *compiler, s *Sink) error {
	switch s.Connector {
	case "kafka", "files", "postgres", "console", "iceberg":
		return nil
	case "":
		return c.errAt(-1, false, "sink %s: option connector is required (%s)", s.Name, sinkConnectors)
	}
	return c.errAt(s.opts.vals["connector"].loc, true, "sink %s: connector %s is not supported; the sink connectors are %s", s.Name, s.opts.show("connector"), sinkConnectors)
}

// checkSinkOptions reads the connector's options without opening anything,
// so a typo fails at planning.
func checkSinkOptions(c *compiler, s *Sink) error {
	_, err := sinkOpener(s, nil)
	if err != nil {
		return err
	}
	return s.opts.unknown(commonSinkOpts...)
}

// sinkOpener reads the sink's options into a function that opens it.
func sinkOpener(s *Sink, _ *config) (func(ctx context.Context, cfg *config) (engine.Sink, func() error, error), error) {
	o := s.opts
	switch s.Connector {
	case "kafka":
		brokers, err := o.required("brokers", "host:port,…")
		if err != nil {
			return nil, err
		}
		topic, err := o.required("topic", "the topic the rows go to")
		if err != nil {
			return nil, err
		}
		opts := []kafkasink.Option{kafkasink.WithBrokers(strings.Split(brokers, ",")...), kafkasink.WithTopic(topic), kafkasink.WithName(s.Name)}
		if o.has("key_column") {
			col := o.str("key_column", "")
			if !slices.Contains(s.q.cols, col) {
				return nil, o.errAt("key_column", "%q is not a column of the query (%s)", col, strings.Join(s.q.cols, ", "))
			}
			opts = append(opts, kafkasink.WithKeyColumn(col))
		}
		cols := s.q.cols
		if o.has("value_columns") {
			cols = o.list("value_columns")
		}
		opts = append(opts, kafkasink.WithValueJSON(cols...))
		if o.has("transactional_id") {
			opts = append(opts, kafkasink.WithTransactionalID(o.str("transactional_id", "")))
		}
		if o.has("progress_topic") {
			opts = append(opts, kafkasink.WithProgressTopic(o.str("progress_topic", "")))
		}
		if o.has("transaction_timeout") {
			d, err := o.duration("transaction_timeout", 0)
			if err != nil {
				return nil, err
			}
			opts = append(opts, kafkasink.WithTransactionTimeout(d))
		}
		m, err := saslMechanism(o)
		if err != nil {
			return nil, err
		}
		if m != nil {
			opts = append(opts, kafkasink.WithSASL(m))
		}
		return func(ctx context.Context, cfg *config) (engine.Sink, func() error, error) {
			k, err := kafkasink.New(append(opts, kafkasink.WithLogger(cfg.logger))...)
			if err != nil {
				return nil, nil, err
			}
			return k, k.Close, nil
		}, nil
	case "files":
		path, err := o.required("path", "the table's directory, file:// or s3:// URL")
		if err != nil {
			return nil, err
		}
		var opts []filesink.Option
		if o.has("partition_by") {
			opts = append(opts, filesink.WithPartitionBy(o.list("partition_by")...))
		}
		return func(ctx context.Context, cfg *config) (engine.Sink, func() error, error) {
			st, err := storage.Open(ctx, path, cfg.openers)
			if err != nil {
				return nil, nil, err
			}
			fs, err := filesink.New(st, opts...)
			if err != nil {
				return nil, nil, errors.Join(err, st.Close())
			}
			return fs, st.Close, nil
		}, nil
	case "postgres":
		dsn, err := o.required("dsn", "a PostgreSQL URL; write it as '${ENV_VAR}' to keep the password out of the file")
		if err != nil {
			return nil, err
		}
		table, err := o.required("table", "the table the rows go to")
		if err != nil {
			return nil, err
		}
		job := o.str("job", s.Name)
		var opts []postgres.Option
		if o.has("key_columns") {
			opts = append(opts, postgres.WithKeyColumns(o.list("key_columns")...))
		}
		if o.has("merge_add") {
			opts = append(opts, postgres.WithMerge(postgres.MergeAdd, o.list("merge_add")...))
		}
		create, err := o.bool("create_tables", false)
		if err != nil {
			return nil, err
		}
		opts = append(opts, postgres.WithCreateTables(create))
		if o.has("table_schema") {
			opts = append(opts, postgres.WithTableSchema(o.str("table_schema", "")))
		}
		mode := o.str("write", "offsets-in-sink")
		if mode != "offsets-in-sink" && mode != "upsert" {
			return nil, o.errAt("write", "%s: the ways to write are offsets-in-sink (a progress table in the same transaction) and upsert (a batch id column per row)", o.show("write"))
		}
		return func(ctx context.Context, cfg *config) (engine.Sink, func() error, error) {
			pool, err := postgres.Connect(ctx, dsn)
			if err != nil {
				return nil, nil, fmt.Errorf("sink %s: %w", s.Name, err)
			}
			closer := func() error { pool.Close(); return nil }
			opts := append(opts, postgres.WithLogger(cfg.logger))
			var sk engine.Sink
			if mode == "upsert" {
				sk, err = postgres.NewUpsert(pool, table, opts...)
			} else {
				sk, err = postgres.NewOffsetsInSink(pool, job, table, opts...)
			}
			if err != nil {
				pool.Close()
				return nil, nil, err
			}
			return sk, closer, nil
		}, nil
	case "iceberg":
		return icebergSinkOpener(s)
	case "console":
		n, err := o.int64("max_rows", 20)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, cfg *config) (engine.Sink, func() error, error) {
			return consolesink.New(cfg.stdout(), int(n)), func() error { return nil }, nil
		}, nil
	}
	return nil, fmt.Errorf("sql: sink %s: connector %q", s.Name, s.Connector)
}

func (c *config) stdout() io.Writer {
	if c.out != nil {
		return c.out
	}
	return os.Stdout
}

// openSource opens a source for one query.
func openSource(ctx context.Context, src *sourceDef, cfg *config) (engine.Source, func() error, error) {
	switch src.connector {
	case "kafka":
		opts, err := kafkaSourceOptions(src)
		if err != nil {
			return nil, nil, err
		}
		var fields []arrow.Field
		for _, f := range src.schema.Fields() {
			if !slices.Contains([]string{kafka.ColKey, kafka.ColValue, kafka.ColTopic, kafka.ColPartition, kafka.ColOffset, kafka.ColTimestamp, kafka.ColHeaders}, f.Name) {
				fields = append(fields, f)
			}
		}
		k, err := kafka.New(append(opts, kafka.WithValueJSON(arrow.NewSchema(fields, nil)), kafka.WithLogger(cfg.logger))...)
		if err != nil {
			return nil, nil, err
		}
		return k, k.Close, nil
	case "files":
		f, opts, err := filesSourceOptions(src)
		if err != nil {
			return nil, nil, err
		}
		fs, err := files.New(src.opts.str("path", ""), f, src.schema, opts...)
		if err != nil {
			return nil, nil, err
		}
		return fs, func() error { return nil }, nil
	case "rate":
		opts, err := rateOptions(src)
		if err != nil {
			return nil, nil, err
		}
		r, err := rate.New(opts...)
		if err != nil {
			return nil, nil, err
		}
		return r, func() error { return nil }, nil
	case "iceberg":
		return openIcebergSource(ctx, src)
	}
	return nil, nil, fmt.Errorf("sql: source %s: connector %q", src.name, src.connector)
}

// Query is a sink's query, opened: the engine query with its source, sink
// and checkpoint. Close releases them after Run returns.
type Query struct {
	*engine.Query
	Sink    *Sink
	closers []func() error
}

// Close closes the sink, the source and the checkpoint store.
func (q *Query) Close() error {
	var errs []error
	for i := len(q.closers) - 1; i >= 0; i-- {
		errs = append(errs, q.closers[i]())
	}
	return errors.Join(errs...)
}

// CheckpointLocation is where the sink keeps its checkpoint: its
// checkpoint option, or <root>/<sink name>.
func (p *Program) CheckpointLocation(s *Sink, root string) (string, error) {
	if s.Checkpoint != "" {
		return s.Checkpoint, nil
	}
	if root == "" {
		root = p.cfg.root
	}
	if root == "" {
		return "", fmt.Errorf("sql: sink %s (line %d:%d): no checkpoint option and no checkpoint root (WithCheckpointRoot, onceflow run -checkpoint-root)", s.Name, s.Line, s.Col)
	}
	return strings.TrimSuffix(root, "/") + "/" + s.Name, nil
}

// Open builds the engine query of the named sink: it opens the source, the
// sink's connector (or the one given WithSink) and the checkpoint. opts
// add to those given to Compile. Run it with Run or engine.RunUntilSignal,
// then Close it.
func (p *Program) Open(ctx context.Context, sink string, opts ...Option) (*Query, error) {
	cfg := p.cfg
	cfg.engineOpts = slices.Clone(cfg.engineOpts)
	for _, o := range opts {
		o(&cfg)
	}
	s := p.Sink(sink)
	if s == nil {
		var names []string
		for _, s := range p.sinks {
			names = append(names, s.Name)
		}
		return nil, fmt.Errorf("sql: no sink %q (sinks: %s)", sink, strings.Join(names, ", "))
	}
	q := &Query{Sink: s}
	fail := func(err error) (*Query, error) {
		return nil, errors.Join(fmt.Errorf("sql: open sink %s: %w", s.Name, err), q.Close())
	}
	loc, err := p.CheckpointLocation(s, cfg.root)
	if err != nil {
		return nil, err
	}
	store, err := storage.Open(ctx, loc, cfg.openers)
	if err != nil {
		return fail(err)
	}
	q.closers = append(q.closers, store.Close)
	srcs := map[string]engine.Source{}
	for _, sd := range s.q.srcs {
		if _, ok := srcs[sd.name]; ok {
			continue
		}
		src, closeSrc, err := openSource(ctx, sd, &cfg)
		if err != nil {
			return fail(err)
		}
		q.closers = append(q.closers, closeSrc)
		srcs[sd.name] = src
	}
	out := cfg.sink
	if out == nil {
		open, err := sinkOpener(s, &cfg)
		if err != nil {
			return fail(err)
		}
		var closeSink func() error
		if out, closeSink, err = open(ctx, &cfg); err != nil {
			return fail(err)
		}
		q.closers = append(q.closers, closeSink)
	}
	eo := []engine.Option{
		engine.WithName(s.Name),
		engine.WithCheckpoint(store),
		engine.WithSink(out),
		engine.WithOutputMode(s.Mode),
		engine.WithTrigger(s.Trigger),
		engine.WithStatePartitions(s.Partitions),
		engine.WithMinBatchesToRetain(int(s.retain)),
		engine.WithSnapshotEvery(int(s.snapshotEvery)),
		engine.WithLogger(cfg.logger),
	}
	if g, ok := out.(engine.GuaranteeReporter); ok && g.Guarantee() == engine.AtLeastOnce {
		eo = append(eo, engine.WithAtLeastOnce())
	}
	eq, err := engine.NewQuery(s.stream(srcs, len(s.q.ops)), append(eo, cfg.engineOpts...)...)
	if err != nil {
		return fail(err)
	}
	q.Query = eq
	return q, nil
}

// saslMechanism reads sasl_mechanism (plain, scram-sha-256,
// scram-sha-512), sasl_user and sasl_password; nil when none is set.
func saslMechanism(o *options) (sasl.Mechanism, error) {
	if !o.has("sasl_mechanism") {
		if o.has("sasl_user") || o.has("sasl_password") {
			return nil, o.c.errAt(-1, false, "%s: sasl_user and sasl_password need sasl_mechanism (plain, scram-sha-256 or scram-sha-512)", o.stmt)
		}
		return nil, nil
	}
	user, err := o.required("sasl_user", "the SASL user name")
	if err != nil {
		return nil, err
	}
	pass, err := o.required("sasl_password", "the SASL password, as '${ENV_VAR}'")
	if err != nil {
		return nil, err
	}
	switch m := strings.ToLower(o.str("sasl_mechanism", "")); m {
	case "plain":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "scram-sha-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "scram-sha-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, o.errAt("sasl_mechanism", "%s: the mechanisms are plain, scram-sha-256 and scram-sha-512", o.show("sasl_mechanism"))
}
