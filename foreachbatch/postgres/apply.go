package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/cespare/xxhash/v2"
	"github.com/jackc/pgx/v5"
)

// applier writes the rows of one batch into the target table inside a
// transaction it is given: COPY into a temporary stage table, then one
// INSERT … SELECT … ON CONFLICT from the stage.
type applier struct {
	target       table
	keys         []string
	merge        map[string]MergeOp
	createTables bool
	truncateTS   bool
	batchCol     string // the upsert's batch id column; "" under the progress guard

	mu   sync.Mutex
	last *plan // plan of the last schema and table columns seen
}

func newApplier(target table, cfg *config) *applier {
	return &applier{
		target:       target,
		keys:         cfg.keys,
		merge:        cfg.merge,
		createTables: cfg.createTables,
		truncateTS:   cfg.truncateTS,
		batchCol:     cfg.batchCol,
	}
}

// plan is everything derived from one output schema and the table's columns.
type plan struct {
	schema   *arrow.Schema
	table    []pgColumn // the target's columns the plan was made for
	stage    string     // temporary table name, in pg_temp
	cols     []string
	conv     []func(a arrow.Array, i int) any
	keyIdx   []int // field indexes of the key columns, checked for duplicates
	keyCut   []int // per key column: the digits it is truncated to, -1 for none
	preAgg   bool  // every non-key column is an add merge: duplicates are summed
	stageSQL string
	insert   string // INSERT … SELECT from the stage
	insertGB string // the same grouped by key, summing: for preAgg batches with duplicates
}

// planFor returns the plan for schema, reading the catalog through q the
// first time a schema is seen (and creating the table under
// WithCreateTables). The plan may be stale by the time it is used: apply
// checks it against the table under a lock.
func (ap *applier) planFor(ctx context.Context, q querier, schema *arrow.Schema) (*plan, error) {
	ap.mu.Lock()
	p := ap.last
	ap.mu.Unlock()
	if p != nil && (p.schema == schema || p.schema.Equal(schema)) {
		return p, nil
	}
	if _, _, err := ap.checkOutput(schema); err != nil {
		return nil, err // before a table is created for it
	}
	cols, exists, err := describe(ctx, q, ap.target)
	if err != nil {
		return nil, err
	}
	created := false
	if !exists && ap.createTables {
		for _, f := range schema.Fields() {
			if f.Type.ID() != arrow.TIMESTAMP {
				continue
			}
			if err := checkColumn(ap.target.sql(), f, createdTimestamp(), ap.truncateTS); err != nil {
				return nil, wrapOp("table "+ap.target.sql()+" not created", err)
			}
		}
		ddl, err := createTargetSQL(ap.target, schema, ap.keys, ap.batchCol)
		if err != nil {
			return nil, err
		}
		if _, err := q.Exec(ctx, ddl); err != nil {
			return nil, fmt.Errorf("create table %s: %w", ap.target.sql(), err)
		}
		created = true
		if cols, exists, err = describe(ctx, q, ap.target); err != nil {
			return nil, err
		}
	}
	if !exists {
		return nil, fmt.Errorf("%w: table %s does not exist (or is not on the search_path)", ErrSchemaMismatch, ap.target.sql())
	}
	p, err = ap.buildPlan(ctx, q, schema, cols)
	if err != nil {
		return nil, err
	}
	if !created {
		// A table created through q, maybe inside a transaction that can
		// still roll back, is described again next time.
		ap.keep(p)
	}
	return p, nil
}

func (ap *applier) keep(p *plan) {
	ap.mu.Lock()
	ap.last = p
	ap.mu.Unlock()
}

// current returns a plan that matches the table as it is now and will stay
// until tx ends: it locks the table against ALTER and DROP (ACCESS SHARE,
// which only those conflict with) and reads its columns, in one round trip.
// When they are not the ones p was made for (the table was altered while
// the query ran), the plan is made again and checked like a new one: an
// incompatible change fails the batch naming the column; a compatible one
// (a widened type, a new nullable column) is followed.
func (ap *applier) current(ctx context.Context, tx pgx.Tx, schema *arrow.Schema, p *plan) (*plan, error) {
	b := &pgx.Batch{}
	b.Queue("LOCK TABLE " + ap.target.sql() + " IN ACCESS SHARE MODE")
	b.Queue(describeSQL, ap.target.sql())
	br := tx.SendBatch(ctx, b)
	_, lockErr := br.Exec()
	var cols []pgColumn
	var exists bool
	var descErr error
	if lockErr == nil {
		var rows pgx.Rows
		if rows, descErr = br.Query(); descErr == nil {
			cols, exists, descErr = collectColumns(rows)
		}
	}
	closeErr := br.Close()
	switch {
	case lockErr != nil:
		return nil, fmt.Errorf("lock table %s: %w", ap.target.sql(), lockErr)
	case descErr != nil:
		return nil, fmt.Errorf("read columns of %s: %w", ap.target.sql(), descErr)
	case closeErr != nil:
		return nil, fmt.Errorf("read columns of %s: %w", ap.target.sql(), closeErr)
	case !exists:
		return nil, fmt.Errorf("%w: table %s does not exist (or is not on the search_path)", ErrSchemaMismatch, ap.target.sql())
	}
	if slices.Equal(cols, p.table) {
		return p, nil
	}
	np, err := ap.buildPlan(ctx, tx, schema, cols)
	if err != nil {
		return nil, wrapOp("table changed while the query ran", err)
	}
	ap.keep(np)
	return np, nil
}

// checkOutput checks what the output schema alone can get wrong, and
// returns its columns by name and whether the plan sums duplicates (every
// non-key column an add merge).
func (ap *applier) checkOutput(schema *arrow.Schema) (byName map[string]int, preAgg bool, err error) {
	tname := ap.target.sql()
	fields := schema.Fields()
	byName = make(map[string]int, len(fields))
	for i, f := range fields {
		if _, dup := byName[f.Name]; dup {
			return nil, false, fmt.Errorf("%w: output schema has two columns named %q", ErrSchemaMismatch, f.Name)
		}
		byName[f.Name] = i
	}
	for _, k := range ap.keys {
		if _, ok := byName[k]; !ok {
			return nil, false, fmt.Errorf("%w: key column %q is not in the output schema of table %s", ErrSchemaMismatch, k, tname)
		}
	}
	nonKey, adds := 0, 0
	for _, f := range fields {
		if isKey(ap.keys, f.Name) {
			continue
		}
		nonKey++
		if ap.merge[f.Name] == MergeAdd {
			adds++
			if !numeric(f.Type) {
				return nil, false, &ColumnError{Table: tname, Column: f.Name, ArrowType: f.Type.String(), PGType: "(add merge)",
					Reason: "an add merge needs a numeric column"}
			}
		}
	}
	if _, ok := byName[ap.batchCol]; ok && ap.batchCol != "" {
		return nil, false, fmt.Errorf("%w: output column %q has the name of the batch id column of table %s; rename it, or name another batch id column with WithBatchIDColumn",
			ErrSchemaMismatch, ap.batchCol, tname)
	}
	for _, col := range slices.Sorted(maps.Keys(ap.merge)) {
		if _, ok := byName[col]; !ok {
			return nil, false, fmt.Errorf("%w: merge column %q is not in the output schema of table %s", ErrSchemaMismatch, col, tname)
		}
	}
	return byName, len(ap.keys) > 0 && adds > 0 && adds == nonKey, nil
}

// buildPlan checks schema against the table's columns cols and derives the
// statements of a batch.
func (ap *applier) buildPlan(ctx context.Context, q querier, schema *arrow.Schema, cols []pgColumn) (*plan, error) {
	tname := ap.target.sql()
	fields := schema.Fields()
	byName, preAgg, err := ap.checkOutput(schema)
	if err != nil {
		return nil, err
	}
	p := &plan{schema: schema, table: cols, preAgg: preAgg}
	h := xxhash.New()
	_, _ = h.WriteString(tname)
	for _, f := range fields {
		i := slices.IndexFunc(cols, func(c pgColumn) bool { return c.name == f.Name })
		if i < 0 {
			return nil, &ColumnError{Table: tname, Column: f.Name, ArrowType: f.Type.String()}
		}
		c := cols[i]
		if err := checkColumn(tname, f, c, ap.truncateTS); err != nil {
			return nil, err
		}
		p.cols = append(p.cols, f.Name)
		p.conv = append(p.conv, converter(f.Type, c))
		_, _ = fmt.Fprintf(h, "\x00%s\x00%s\x00%d", c.name, c.typname, c.typmod)
	}
	for _, c := range cols {
		// Every insert would fail on it: say so now, naming the column.
		if _, out := byName[c.name]; !out && c.name != ap.batchCol && c.notNull && !c.hasDefault {
			return nil, &ColumnError{Table: tname, Column: c.name, PGType: c.display,
				Reason: "NOT NULL with no default, and the output has no such column, so no row can be inserted; give it a default, drop NOT NULL, or add the column to the output"}
		}
	}
	if ap.batchCol != "" {
		if err := checkBatchColumn(ap.target, ap.batchCol, cols); err != nil {
			return nil, err
		}
	}
	if len(ap.keys) > 0 {
		ok, err := hasUniqueIndex(ctx, q, ap.target, ap.keys)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%w: table %s has no unique index or primary key on exactly (%s), which the upsert needs",
				ErrSchemaMismatch, tname, quoteAll(ap.keys))
		}
		for _, k := range ap.keys {
			fi := byName[k]
			p.keyIdx = append(p.keyIdx, fi)
			cut := -1
			if c := cols[slices.IndexFunc(cols, func(c pgColumn) bool { return c.name == k })]; timestampCut(fields[fi].Type, c) > 0 {
				cut = columnDigits(c)
			}
			p.keyCut = append(p.keyCut, cut)
		}
	}
	// The stage's name follows its column types: pgx keeps the column types
	// of a COPY target per connection under the statement's text, so a
	// retyped column must give a COPY of another name.
	p.stage = "onceflow_stage_" + strconv.FormatUint(h.Sum64(), 16)
	stage := pgx.Identifier{"pg_temp", p.stage}.Sanitize()
	p.stageSQL = "DROP TABLE IF EXISTS " + stage + "; CREATE TEMPORARY TABLE " + quote(p.stage) +
		" ON COMMIT DROP AS SELECT " + quoteAll(p.cols) + " FROM " + tname + " WITH NO DATA"
	p.insert = ap.insertSQL(p, stage, false)
	if p.preAgg {
		p.insertGB = ap.insertSQL(p, stage, true)
	}
	return p, nil
}

func (ap *applier) insertSQL(p *plan, stage string, group bool) string {
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(ap.target.sql())
	b.WriteString(" AS dst (")
	b.WriteString(quoteAll(p.cols))
	if ap.batchCol != "" {
		b.WriteString(", " + quote(ap.batchCol))
	}
	b.WriteString(") SELECT ")
	for i, c := range p.cols {
		if i > 0 {
			b.WriteString(", ")
		}
		if group && !isKey(ap.keys, c) {
			b.WriteString("sum(" + quote(c) + ")")
		} else {
			b.WriteString(quote(c))
		}
	}
	if ap.batchCol != "" {
		b.WriteString(", $1::bigint") // the batch id
	}
	b.WriteString(" FROM ")
	b.WriteString(stage)
	if group {
		b.WriteString(" GROUP BY ")
		b.WriteString(quoteAll(ap.keys))
	}
	if len(ap.keys) == 0 {
		return b.String()
	}
	b.WriteString(" ON CONFLICT (")
	b.WriteString(quoteAll(ap.keys))
	b.WriteString(") DO ")
	var sets []string
	for _, c := range p.cols {
		if isKey(ap.keys, c) {
			continue
		}
		qc := quote(c)
		if ap.merge[c] == MergeAdd {
			// A NULL on one side counts as absent; NULL on both stays NULL.
			sets = append(sets, qc+" = COALESCE(dst."+qc+" + EXCLUDED."+qc+", dst."+qc+", EXCLUDED."+qc+")")
		} else {
			sets = append(sets, qc+" = EXCLUDED."+qc)
		}
	}
	if ap.batchCol != "" {
		// The row guard: a stored row changes only for the batch that wrote
		// it (a repeat, same values) or a later one, never for an older
		// batch; the WHERE is evaluated on the newest committed version of
		// the row, so a concurrent newer batch wins whatever the timing.
		qb := quote(ap.batchCol)
		sets = append(sets, qb+" = EXCLUDED."+qb)
		b.WriteString("UPDATE SET ")
		b.WriteString(strings.Join(sets, ", "))
		b.WriteString(" WHERE dst." + qb + " IS NULL OR dst." + qb + " <= EXCLUDED." + qb)
		return b.String()
	}
	if len(sets) == 0 {
		b.WriteString("NOTHING")
	} else {
		b.WriteString("UPDATE SET ")
		b.WriteString(strings.Join(sets, ", "))
	}
	return b.String()
}

// apply writes the rows through tx and returns how many rows it staged.
func (ap *applier) apply(ctx context.Context, tx pgx.Tx, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) (int64, error) {
	total := countRows(records)
	if total == 0 {
		return 0, nil
	}
	p, err := ap.planFor(ctx, tx, schema)
	if err != nil {
		return 0, err
	}
	if p, err = ap.current(ctx, tx, schema, p); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, p.stageSQL); err != nil {
		return 0, fmt.Errorf("create stage table for %s: %w", ap.target.sql(), err)
	}
	src := &copySource{p: p, recs: records, batchID: batchID, keys: ap.keys, vals: make([]any, len(p.cols))}
	if len(p.keyIdx) > 0 {
		src.seen = make(map[string]int64, total)
	}
	n, err := tx.CopyFrom(ctx, pgx.Identifier{"pg_temp", p.stage}, p.cols, src)
	if src.err != nil {
		return 0, src.err // our own rejection, which the server only echoes
	}
	if err != nil {
		return 0, fmt.Errorf("copy rows into stage table for %s: %w", ap.target.sql(), err)
	}
	insert := p.insert
	if src.dup {
		insert = p.insertGB // only preAgg plans get here with duplicates
	}
	var args []any
	if ap.batchCol != "" {
		args = append(args, batchID)
	}
	if _, err := tx.Exec(ctx, insert, args...); err != nil {
		return 0, fmt.Errorf("insert into %s: %w", ap.target.sql(), err)
	}
	return n, nil
}

// copySource feeds the records to COPY row by row, converting each value,
// and rejects a key seen twice in the batch unless the plan sums them (then
// it notes the duplicate, and only then does the INSERT group by key).
type copySource struct {
	p       *plan
	recs    []arrow.RecordBatch
	batchID int64
	keys    []string
	r, i    int
	row     int64 // row number within the batch, 0-based
	started bool
	vals    []any
	seen    map[string]int64
	dup     bool // a key was seen twice (allowed only when the plan sums)
	keyBuf  []byte
	err     error
}

func (s *copySource) Next() bool {
	if s.err != nil {
		return false
	}
	if s.started {
		s.i++
		s.row++
	}
	s.started = true
	for s.r < len(s.recs) && int64(s.i) >= s.recs[s.r].NumRows() {
		s.r++
		s.i = 0
	}
	if s.r >= len(s.recs) {
		return false
	}
	rec := s.recs[s.r]
	for c := range s.p.cols {
		s.vals[c] = s.p.conv[c](rec.Column(c), s.i)
	}
	if s.seen != nil {
		s.err = s.checkKey(rec)
		return s.err == nil
	}
	return true
}

func (s *copySource) checkKey(rec arrow.RecordBatch) error {
	s.keyBuf = s.keyBuf[:0]
	for j, fi := range s.p.keyIdx {
		col := rec.Column(fi)
		if col.IsNull(s.i) {
			return fmt.Errorf("batch %d row %d: key column %q is null", s.batchID, s.row, s.keys[j])
		}
		v := col.ValueStr(s.i)
		if s.p.keyCut[j] >= 0 {
			v = s.vals[fi].(time.Time).Format(time.RFC3339Nano) // as the table will hold it
		}
		s.keyBuf = strconv.AppendInt(s.keyBuf, int64(len(v)), 10)
		s.keyBuf = append(s.keyBuf, ':')
		s.keyBuf = append(s.keyBuf, v...)
	}
	if first, dup := s.seen[string(s.keyBuf)]; dup {
		if s.p.preAgg {
			s.dup = true
			return nil
		}
		parts := make([]string, len(s.p.keyIdx))
		for j, fi := range s.p.keyIdx {
			parts[j] = fmt.Sprintf("%s=%s", s.keys[j], rec.Column(fi).ValueStr(s.i))
			if s.p.keyCut[j] >= 0 {
				parts[j] = fmt.Sprintf("%s=%s, which is %s once truncated to %s by WithTruncateTimestamps", s.keys[j],
					rec.Column(fi).ValueStr(s.i), s.vals[fi].(time.Time).Format(time.RFC3339Nano), digitsName(s.p.keyCut[j]))
			}
		}
		return fmt.Errorf("%w: batch %d rows %d and %d both have key (%s); set merges need one row per key",
			ErrDuplicateKey, s.batchID, first, s.row, strings.Join(parts, ", "))
	}
	s.seen[string(s.keyBuf)] = s.row
	return nil
}

func (s *copySource) Values() ([]any, error) { return s.vals, nil }
func (s *copySource) Err() error             { return s.err }

func isKey(keys []string, col string) bool {
	for _, k := range keys {
		if k == col {
			return true
		}
	}
	return false
}

func numeric(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT32, arrow.FLOAT64, arrow.DECIMAL128:
		return true
	}
	return false
}

func countRows(records []arrow.RecordBatch) int64 {
	var n int64
	for _, r := range records {
		n += r.NumRows()
	}
	return n
}
