package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/storage"
)

// Output is one committed output of the query: KafkaOutput, LakeOutput,
// PostgresOutput or JSONLinesOutput.
type Output interface {
	describe() string
	// cumulative is true when the output holds one running value per key.
	cumulative() bool
	rows(ctx context.Context, key, value, batchCol string, fn func(outRow)) error
}

// KafkaOutput is a topic of JSON values with the key and value columns
// (and the batch column, if any), read with read_committed from the
// earliest offset to the last stable offset. Rows are summed per key.
func KafkaOutput(brokers []string, topic string, opts ...kgo.Opt) Output {
	return &kafkaOutput{kafkaIO{brokers: brokers, topic: topic, opts: opts}}
}

type kafkaOutput struct{ kafkaIO }

func (k *kafkaOutput) cumulative() bool { return false }

func (k *kafkaOutput) rows(ctx context.Context, key, value, batchCol string, fn func(outRow)) error {
	fields := []arrow.Field{
		{Name: key, Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: value, Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}
	if batchCol != "" {
		fields = append(fields, arrow.Field{Name: batchCol, Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	}
	src, err := k.source(fields...)
	if err != nil {
		return err
	}
	defer src.Close()
	start, err := src.InitialOffset(ctx)
	if err != nil {
		return err
	}
	end, err := src.LatestOffset(ctx, start)
	if err != nil {
		return err
	}
	return src.Read(ctx, start, end, func(rec arrow.RecordBatch) error {
		defer rec.Release()
		return eachRow(rec, key, value, batchCol, fn)
	})
}

// LakeOutput is a file-sink table, read through its metadata log: only
// committed files. Rows are summed per key.
func LakeOutput(table storage.Store) Output { return &lakeOutput{table: table} }

type lakeOutput struct{ table storage.Store }

func (l *lakeOutput) describe() string { return "lake:" + storage.Redact(l.table.URL()) }
func (l *lakeOutput) cumulative() bool { return false }
func (l *lakeOutput) rows(ctx context.Context, key, value, batchCol string, fn func(outRow)) error {
	ki, vi, bi := -1, -1, -1
	return filesink.ReadRows(ctx, l.table, func(f filesink.File, cols []string, row []any) error {
		if ki < 0 {
			for i, c := range cols {
				switch c {
				case key:
					ki = i
				case value:
					vi = i
				}
				if batchCol != "" && c == batchCol {
					bi = i
				}
			}
			if ki < 0 || vi < 0 {
				return fmt.Errorf("%w: table lacks column %q or %q (columns: %s)", ErrConfig, key, value, strings.Join(cols, ", "))
			}
		}
		var r outRow
		var err error
		if r.key, err = anyString(row[ki]); err != nil {
			return fmt.Errorf("%s: column %q: %w", f.Path, key, err)
		}
		if r.value, _, err = anyInt(row[vi]); err != nil {
			return fmt.Errorf("%s: column %q: %w", f.Path, value, err)
		}
		if bi >= 0 {
			if r.batch, r.hasBatch, err = anyInt(row[bi]); err != nil {
				return fmt.Errorf("%s: column %q: %w", f.Path, batchCol, err)
			}
		}
		fn(r)
		return nil
	})
}

func anyString(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case int64, int32, int16, int8:
		return fmt.Sprint(x), nil
	}
	return "", fmt.Errorf("%w: key of type %T is not supported", ErrConfig, v)
}

func anyInt(v any) (int64, bool, error) {
	switch x := v.(type) {
	case nil:
		return 0, false, nil
	case int64:
		return x, true, nil
	case int32:
		return int64(x), true, nil
	case int16:
		return int64(x), true, nil
	case int8:
		return int64(x), true, nil
	}
	return 0, false, fmt.Errorf("%w: value of type %T is not supported (integers only)", ErrConfig, v)
}

// PostgresOutput is a table holding one cumulative row per key (an
// offsets-in-sink or upsert target): the value is taken, not summed.
// table may be schema-qualified ("s.t"). The pool belongs to the caller.
func PostgresOutput(pool *pgxpool.Pool, table string) Output {
	return &pgOutput{pool: pool, table: table}
}

type pgOutput struct {
	pool  *pgxpool.Pool
	table string
}

func (p *pgOutput) describe() string {
	c := p.pool.Config().ConnConfig
	return fmt.Sprintf("postgres://%s:%d/%s?table=%s", c.Host, c.Port, c.Database, p.table) // never the password
}
func (p *pgOutput) cumulative() bool { return true }

func (p *pgOutput) rows(ctx context.Context, key, value, batchCol string, fn func(outRow)) error {
	tbl := pgx.Identifier(strings.Split(p.table, ".")).Sanitize()
	q := fmt.Sprintf("SELECT %s::text, %s::bigint", pgx.Identifier{key}.Sanitize(), pgx.Identifier{value}.Sanitize())
	withBatch := batchCol != ""
	if withBatch {
		ok, err := p.hasColumn(ctx, batchCol)
		if err != nil {
			return err
		}
		withBatch = ok
	}
	if withBatch {
		q += ", " + pgx.Identifier{batchCol}.Sanitize() + "::bigint"
	}
	rows, err := p.pool.Query(ctx, q+" FROM "+tbl)
	if err != nil {
		return fmt.Errorf("select from %s: %w", p.table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k *string
		var v, b *int64
		dest := []any{&k, &v}
		if withBatch {
			dest = append(dest, &b)
		}
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("select from %s: %w", p.table, err)
		}
		var r outRow
		if k != nil {
			r.key = *k
		}
		if v != nil {
			r.value = *v
		}
		if b != nil {
			r.batch, r.hasBatch = *b, true
		}
		fn(r)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("select from %s: %w", p.table, err)
	}
	return nil
}

func (p *pgOutput) hasColumn(ctx context.Context, col string) (bool, error) {
	tbl := pgx.Identifier(strings.Split(p.table, ".")).Sanitize()
	_, err := p.pool.Exec(ctx, fmt.Sprintf("SELECT %s FROM %s LIMIT 0", pgx.Identifier{col}.Sanitize(), tbl))
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42703" { // undefined_column
		return false, nil
	}
	return err == nil, err
}

// JSONLinesOutput is a file of JSON objects, one per line, as a
// foreachBatch function might append them. Lines without the key field
// (for example batch markers) are skipped; rows are summed per key.
func JSONLinesOutput(path string) Output { return &jsonlOutput{path: path} }

type jsonlOutput struct{ path string }

func (j *jsonlOutput) describe() string { return "jsonl:" + j.path }
func (j *jsonlOutput) cumulative() bool { return false }

func (j *jsonlOutput) rows(_ context.Context, key, value, batchCol string, fn func(outRow)) error {
	f, err := os.Open(j.path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("%s:%d: %w", j.path, line, err)
		}
		kr, ok := m[key]
		if !ok {
			continue
		}
		var r outRow
		var ks any
		if err := json.Unmarshal(kr, &ks); err != nil {
			return fmt.Errorf("%s:%d: field %q: %w", j.path, line, key, err)
		}
		switch x := ks.(type) {
		case string:
			r.key = x
		case nil:
		default:
			r.key = string(kr)
		}
		if vr, ok := m[value]; ok && string(vr) != "null" {
			if err := json.Unmarshal(vr, &r.value); err != nil {
				return fmt.Errorf("%s:%d: field %q: %w", j.path, line, value, err)
			}
		}
		if br, ok := m[batchCol]; ok && batchCol != "" && string(br) != "null" {
			if err := json.Unmarshal(br, &r.batch); err != nil {
				return fmt.Errorf("%s:%d: field %q: %w", j.path, line, batchCol, err)
			}
			r.hasBatch = true
		}
		fn(r)
	}
	return sc.Err()
}
