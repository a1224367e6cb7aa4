package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// querier is what both a *pgxpool.Pool and a pgx.Tx offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// table is a table name, optionally schema-qualified. Its parts are
// identifiers, always quoted when they reach SQL.
type table struct {
	schema, name string
}

func (t table) ident() pgx.Identifier {
	if t.schema == "" {
		return pgx.Identifier{t.name}
	}
	return pgx.Identifier{t.schema, t.name}
}

// sql is the quoted name, safe to place in a statement.
func (t table) sql() string { return t.ident().Sanitize() }

func quote(col string) string { return pgx.Identifier{col}.Sanitize() }

func quoteAll(cols []string) string {
	q := make([]string, len(cols))
	for i, c := range cols {
		q[i] = quote(c)
	}
	return strings.Join(q, ", ")
}

// describeSQL reads a table's columns from the catalog, in table order, in
// one statement: $1 is the quoted name. A table that does not exist gives
// one row with a NULL oid; one without columns, one row of NULL columns.
const describeSQL = `SELECT r.oid IS NOT NULL, a.attname, ty.typname, format_type(a.atttypid, a.atttypmod), a.atttypmod,
		a.attnotnull, a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> ''
	FROM (SELECT to_regclass($1)::oid AS oid) r
	LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
	LEFT JOIN pg_catalog.pg_type ty ON ty.oid = a.atttypid
	ORDER BY a.attnum`

// describe reads the table's columns from the catalog, in table order.
// exists is false when no such table is visible. The name travels as a
// parameter of to_regclass: nothing is spliced into SQL, and quoting
// resolves exactly the identifiers we were given.
func describe(ctx context.Context, q querier, t table) (cols []pgColumn, exists bool, err error) {
	rows, err := q.Query(ctx, describeSQL, t.sql())
	if err != nil {
		return nil, false, fmt.Errorf("read columns of %s: %w", t.sql(), err)
	}
	cols, exists, err = collectColumns(rows)
	if err != nil {
		return nil, false, fmt.Errorf("read columns of %s: %w", t.sql(), err)
	}
	return cols, exists, nil
}

// collectColumns reads the rows of describeSQL.
func collectColumns(rows pgx.Rows) (cols []pgColumn, exists bool, err error) {
	defer rows.Close()
	for rows.Next() {
		var name, typname, display *string
		var typmod *int32
		var notNull, hasDefault *bool
		if err := rows.Scan(&exists, &name, &typname, &display, &typmod, &notNull, &hasDefault); err != nil {
			return nil, false, err
		}
		if name == nil {
			continue // no such table, or no columns
		}
		cols = append(cols, pgColumn{name: *name, typname: *typname, display: *display, typmod: *typmod,
			notNull: *notNull, hasDefault: *hasDefault})
	}
	return cols, exists, rows.Err()
}

// hasUniqueIndex tells whether the table has a unique index (or primary key)
// on exactly the given columns, as ON CONFLICT (cols) requires.
func hasUniqueIndex(ctx context.Context, q querier, t table, cols []string) (bool, error) {
	rows, err := q.Query(ctx, `SELECT array_agg(a.attname::text ORDER BY a.attname)
		FROM pg_catalog.pg_index i
		JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
		WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indpred IS NULL AND i.indexprs IS NULL
		GROUP BY i.indexrelid`, t.sql())
	if err != nil {
		return false, fmt.Errorf("read indexes of %s: %w", t.sql(), err)
	}
	sets, err := pgx.CollectRows(rows, pgx.RowTo[[]string])
	if err != nil {
		return false, fmt.Errorf("read indexes of %s: %w", t.sql(), err)
	}
	want := slices.Sorted(slices.Values(cols))
	for _, s := range sets {
		if slices.Equal(s, want) {
			return true, nil
		}
	}
	return false, nil
}

// createTargetSQL is the CREATE TABLE IF NOT EXISTS of WithCreateTables: one
// column per output field, typed by the documented mapping, the key columns
// NOT NULL and the primary key, and the upsert's batch id column (batchCol,
// "" for none).
func createTargetSQL(t table, schema *arrow.Schema, keys []string, batchCol string) (string, error) {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS ")
	b.WriteString(t.sql())
	b.WriteString(" (")
	for i, f := range schema.Fields() {
		typ, ok := ddlType(f.Type)
		if !ok {
			return "", &ColumnError{Table: t.sql(), Column: f.Name, ArrowType: f.Type.String(), PGType: "(not created)",
				Reason: "onceflow has no PostgreSQL mapping for this Arrow type"}
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote(f.Name))
		b.WriteByte(' ')
		b.WriteString(typ)
		if slices.Contains(keys, f.Name) {
			b.WriteString(" NOT NULL")
		}
	}
	if batchCol != "" {
		b.WriteString(", " + batchColumnDDL(batchCol))
	}
	if len(keys) > 0 {
		b.WriteString(", PRIMARY KEY (")
		b.WriteString(quoteAll(keys))
		b.WriteByte(')')
	}
	b.WriteByte(')')
	return b.String(), nil
}

// batchColumnDDL is the upsert's batch id column as a column definition: -1
// (older than any batch) for rows written by other means.
func batchColumnDDL(col string) string { return quote(col) + " bigint NOT NULL DEFAULT -1" }

// checkBatchColumn verifies that the upsert table has its batch id column,
// as bigint; the errors carry the statement that fixes the table.
func checkBatchColumn(t table, col string, cols []pgColumn) error {
	i := slices.IndexFunc(cols, func(c pgColumn) bool { return c.name == col })
	if i < 0 {
		return &ColumnError{Table: t.sql(), Column: col, Reason: "the upsert records in it the batch that last wrote each row, " +
			"so that an older batch (a stalled driver's) never overwrites a newer one; add it with: ALTER TABLE " +
			t.sql() + " ADD COLUMN " + batchColumnDDL(col) + " (or name another bigint column with WithBatchIDColumn)"}
	}
	if cols[i].typname != "int8" {
		return &ColumnError{Table: t.sql(), Column: col, PGType: cols[i].display,
			Reason: "the batch id column must be bigint: ALTER TABLE " + t.sql() + " ALTER COLUMN " + quote(col) + " TYPE bigint"}
	}
	return nil
}

// createProgressSQL is the CREATE TABLE IF NOT EXISTS of the progress table.
func createProgressSQL(t table) string {
	return "CREATE TABLE IF NOT EXISTS " + t.sql() +
		" (job text PRIMARY KEY, batch_id bigint NOT NULL, updated_at timestamptz NOT NULL, query_id text)"
}

// checkProgress verifies the progress table's columns and key, and reports
// whether it has the optional query_id column that binds a job to a query.
func checkProgress(ctx context.Context, q querier, t table) (hasQueryID bool, err error) {
	cols, exists, err := describe(ctx, q, t)
	if err != nil {
		return false, err
	}
	if !exists {
		return false, fmt.Errorf("%w: progress table %s does not exist (create it with WithCreateTables(true), or: %s)",
			ErrSchemaMismatch, t.sql(), createProgressSQL(t))
	}
	want := []struct {
		name  string
		types []string
	}{
		{"job", []string{"text", "varchar"}},
		{"batch_id", []string{"int8"}},
		{"updated_at", []string{"timestamptz"}},
	}
	for _, w := range want {
		i := slices.IndexFunc(cols, func(c pgColumn) bool { return c.name == w.name })
		if i < 0 {
			return false, &ColumnError{Table: t.sql(), Column: w.name, ArrowType: strings.Join(w.types, " or "),
				Reason: "progress table column missing"}
		}
		if !slices.Contains(w.types, cols[i].typname) {
			return false, &ColumnError{Table: t.sql(), Column: w.name, PGType: cols[i].display,
				Reason: "progress table column must be " + strings.Join(w.types, " or ")}
		}
	}
	ok, err := hasUniqueIndex(ctx, q, t, []string{"job"})
	if err != nil {
		return false, err
	}
	if !ok {
		return false, &ColumnError{Table: t.sql(), Column: "job", PGType: "text", Reason: "progress table needs a unique index (primary key) on job"}
	}
	i := slices.IndexFunc(cols, func(c pgColumn) bool { return c.name == "query_id" })
	if i >= 0 && !slices.Contains([]string{"text", "varchar"}, cols[i].typname) {
		return false, &ColumnError{Table: t.sql(), Column: "query_id", PGType: cols[i].display, Reason: "progress table column must be text"}
	}
	return i >= 0, nil
}
