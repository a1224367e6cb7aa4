package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/source/files"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
)

// Input is a query's input as the audit reads it: KafkaInput or
// FilesInput.
type Input interface {
	describe() string
	initialOffset(ctx context.Context) (json.RawMessage, error)
	// sum adds the value per key over [start, end) to into and returns
	// the number of rows read. src is the checkpoint's sources/<i>/.
	sum(ctx context.Context, src storage.Store, key, value string, start, end json.RawMessage, into map[string]int64) (int64, error)
}

// KafkaInput is a Kafka topic of JSON values holding the key (a string)
// and the value (an integer), read with read_committed through
// source/kafka. opts are passed to the client (TLS, SASL, …).
func KafkaInput(brokers []string, topic string, opts ...kgo.Opt) Input {
	return &kafkaIO{brokers: brokers, topic: topic, opts: opts}
}

// FilesInput is a landing directory read through source/files with the
// checkpoint's files log, so each batch reads exactly the files it took.
// format is the source's format; for CSV the file must have a header.
func FilesInput(dir string, format files.Format, opts ...files.Option) Input {
	return &filesInput{dir: dir, format: format, opts: opts}
}

type kafkaIO struct {
	brokers []string
	topic   string
	opts    []kgo.Opt
}

func (k *kafkaIO) describe() string {
	return "kafka://" + strings.Join(k.brokers, ",") + "/" + k.topic
}

func (k *kafkaIO) source(fields ...arrow.Field) (*kafka.Source, error) {
	opts := []kafka.Option{kafka.WithBrokers(k.brokers...), kafka.WithTopics(k.topic), kafka.WithValueJSON(arrow.NewSchema(fields, nil))}
	if len(k.opts) > 0 {
		opts = append(opts, kafka.WithClientOpts(k.opts...))
	}
	return kafka.New(opts...)
}

func (k *kafkaIO) initialOffset(ctx context.Context) (json.RawMessage, error) {
	src, err := k.source(arrow.Field{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	return src.InitialOffset(ctx)
}

func (k *kafkaIO) sum(ctx context.Context, _ storage.Store, key, value string, start, end json.RawMessage, into map[string]int64) (int64, error) {
	src, err := k.source(
		arrow.Field{Name: key, Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: value, Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	)
	if err != nil {
		return 0, err
	}
	defer src.Close()
	var n int64
	err = src.Read(ctx, start, end, func(rec arrow.RecordBatch) error {
		defer rec.Release()
		return eachRow(rec, key, value, "", func(r outRow) { into[r.key] += r.value; n++ })
	})
	return n, err
}

type filesInput struct {
	dir    string
	format files.Format
	opts   []files.Option
}

func (f *filesInput) describe() string { return "files:" + f.dir }

func (f *filesInput) initialOffset(context.Context) (json.RawMessage, error) {
	return files.EncodeOffset(-1), nil
}

func (f *filesInput) sum(ctx context.Context, src storage.Store, key, value string, start, end json.RawMessage, into map[string]int64) (int64, error) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: key, Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: value, Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	s, err := files.New(f.dir, f.format, schema, f.opts...)
	if err != nil {
		return 0, err
	}
	if err := s.OpenCheckpoint(ctx, src); err != nil {
		return 0, err
	}
	var n int64
	err = s.Read(ctx, start, end, func(rec arrow.RecordBatch) error {
		defer rec.Release()
		return eachRow(rec, key, value, "", func(r outRow) { into[r.key] += r.value; n++ })
	})
	return n, err
}

// outRow is one output (or input) row reduced to key, value and batch.
type outRow struct {
	key      string
	value    int64
	batch    int64
	hasBatch bool
}

// eachRow calls fn per row of rec with the key (string), value and
// optional batch (integer) columns; a null value counts as 0, a null
// batch as unknown.
func eachRow(rec arrow.RecordBatch, key, value, batchCol string, fn func(outRow)) error {
	sc := rec.Schema()
	col := func(name string) (arrow.Array, error) {
		idx := sc.FieldIndices(name)
		if len(idx) == 0 {
			return nil, fmt.Errorf("%w: no column %q (columns: %s)", ErrConfig, name, names(sc))
		}
		return rec.Column(idx[0]), nil
	}
	kc, err := col(key)
	if err != nil {
		return err
	}
	vc, err := col(value)
	if err != nil {
		return err
	}
	var bc arrow.Array
	if batchCol != "" && len(sc.FieldIndices(batchCol)) > 0 {
		bc, _ = col(batchCol)
	}
	for i := 0; i < int(rec.NumRows()); i++ {
		var r outRow
		if r.key, err = stringAt(kc, i); err != nil {
			return fmt.Errorf("column %q: %w", key, err)
		}
		if r.value, _, err = intAt(vc, i); err != nil {
			return fmt.Errorf("column %q: %w", value, err)
		}
		if bc != nil {
			if r.batch, r.hasBatch, err = intAt(bc, i); err != nil {
				return fmt.Errorf("column %q: %w", batchCol, err)
			}
		}
		fn(r)
	}
	return nil
}

func names(sc *arrow.Schema) string {
	var b strings.Builder
	for i, f := range sc.Fields() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.Name)
	}
	return b.String()
}

func stringAt(a arrow.Array, i int) (string, error) {
	if a.IsNull(i) {
		return "", nil
	}
	switch c := a.(type) {
	case *array.String:
		return c.Value(i), nil
	case *array.LargeString:
		return c.Value(i), nil
	case *array.Binary:
		return string(c.Value(i)), nil
	case *array.Int64:
		return fmt.Sprint(c.Value(i)), nil
	case *array.Int32:
		return fmt.Sprint(c.Value(i)), nil
	}
	return "", fmt.Errorf("%w: key type %s is not supported", ErrConfig, a.DataType())
}

func intAt(a arrow.Array, i int) (int64, bool, error) {
	if a.IsNull(i) {
		return 0, false, nil
	}
	switch c := a.(type) {
	case *array.Int64:
		return c.Value(i), true, nil
	case *array.Int32:
		return int64(c.Value(i)), true, nil
	case *array.Int16:
		return int64(c.Value(i)), true, nil
	case *array.Int8:
		return int64(c.Value(i)), true, nil
	}
	return 0, false, fmt.Errorf("%w: value type %s is not supported (integers only)", ErrConfig, a.DataType())
}
